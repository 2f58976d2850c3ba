//! The compiled structural schema: one tree per CRD version, built once from the
//! `openAPIV3Schema` JSON and shared by every request (prune → default → validate).
//!
//! Follows the shape of upstream `Structural` (k8s.io/apiextensions-apiserver
//! pkg/apiserver/schema/structural.go): generic fields (type, nullable, default), the
//! x-kubernetes-* extensions, and the value validations (enum, bounds, pattern, junctors...).
//! Compilation is lenient: it never fails on a construct the CRD-side checks
//! ([`crate::crd_schema`]) would reject, except for hard limits (nesting depth, node count,
//! regex size) which protect the process from hostile schemas.

use regex::Regex;
use serde_json::{Map, Value};

/// Maximum nesting depth of a schema tree.
pub const MAX_SCHEMA_DEPTH: usize = 64;
/// Maximum number of schema nodes in one compiled schema.
pub const MAX_SCHEMA_NODES: usize = 100_000;
/// Compiled size limit of one `pattern` regex (bytes of the compiled program).
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Size limit of one `pattern`'s precompiled DFA (bigger ones use the regex engine).
pub const PATTERN_DFA_LIMIT: usize = 256 << 10;
/// Total size of the precompiled pattern DFAs of one schema.
pub const SCHEMA_DFA_BUDGET: usize = 8 << 20;

/// Schema `type`. `Any` is the empty type (allowed with int-or-string / preserve-unknown-fields
/// and inside value validations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Any,
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
    /// A type string upstream does not know (kept for messages, never matches).
    Other,
}

impl Type {
    pub fn parse(s: &str) -> Type {
        match s {
            "" => Type::Any,
            "object" => Type::Object,
            "array" => Type::Array,
            "string" => Type::String,
            "integer" => Type::Integer,
            "number" => Type::Number,
            "boolean" => Type::Boolean,
            _ => Type::Other,
        }
    }
}

/// String formats the CR validator checks. Upstream strips every format not in its supported
/// list before validating (pkg/apiserver/validation/formats.go, `StripUnsupportedFormatsPostProcess`)
/// — notably `date-time` is *not* in that list (only `datetime` is), and neither are the numeric
/// formats `int32`, `int64`, `float`, `double`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    BsonObjectId,
    Uri,
    Email,
    Hostname,
    Ipv4,
    Ipv6,
    Cidr,
    Mac,
    Uuid,
    Uuid3,
    Uuid4,
    Uuid5,
    Isbn,
    Isbn10,
    Isbn13,
    CreditCard,
    Ssn,
    HexColor,
    RgbColor,
    Byte,
    Password,
    Date,
    Duration,
    DateTime,
}

impl Format {
    /// The validated format of a schema's `format` string, or `None` if upstream strips it.
    pub fn parse(s: &str) -> Option<Format> {
        Some(match s {
            "bsonobjectid" => Format::BsonObjectId,
            "uri" => Format::Uri,
            "email" => Format::Email,
            "hostname" => Format::Hostname,
            "ipv4" => Format::Ipv4,
            "ipv6" => Format::Ipv6,
            "cidr" => Format::Cidr,
            "mac" => Format::Mac,
            "uuid" => Format::Uuid,
            "uuid3" => Format::Uuid3,
            "uuid4" => Format::Uuid4,
            "uuid5" => Format::Uuid5,
            "isbn" => Format::Isbn,
            "isbn10" => Format::Isbn10,
            "isbn13" => Format::Isbn13,
            "creditcard" => Format::CreditCard,
            "ssn" => Format::Ssn,
            "hexcolor" => Format::HexColor,
            "rgbcolor" => Format::RgbColor,
            "byte" => Format::Byte,
            "password" => Format::Password,
            "date" => Format::Date,
            "duration" => Format::Duration,
            "datetime" => Format::DateTime,
            _ => return None,
        })
    }
}

/// `x-kubernetes-list-type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListType {
    Atomic,
    Set,
    Map,
}

/// `additionalProperties`: a schema, or a bare boolean.
#[derive(Debug, Clone)]
pub enum Additional {
    Bool(bool),
    Schema(Box<Schema>),
}

/// A compiled `pattern`: the source text (for messages), the regex, and — when small enough —
/// the same regex as a precompiled dense DFA, which matches without the regex engine's
/// per-call setup (the same syntax and semantics: both come from regex-automata).
#[derive(Debug, Clone)]
pub struct Pattern {
    pub source: String,
    pub regex: Regex,
    pub dfa: Option<regex_automata::dfa::dense::DFA<Vec<u32>>>,
}

impl Pattern {
    /// Compiles `src` (see [`compile_pattern`]); `dfa_budget` bounds the DFA memory left for
    /// the schema and is reduced by this pattern's DFA.
    pub fn new(src: &str, dfa_budget: &mut usize) -> Result<Pattern, String> {
        let regex = compile_pattern(src)?;
        let dfa = pattern_dfa(src).filter(|d| d.memory_usage() <= *dfa_budget);
        if let Some(d) = &dfa {
            *dfa_budget -= d.memory_usage();
        }
        Ok(Pattern {
            source: src.to_string(),
            regex,
            dfa,
        })
    }

    /// Whether the pattern matches somewhere in `hay` (Go's `regexp.MatchString`).
    #[inline]
    pub fn is_match(&self, hay: &str) -> bool {
        use regex_automata::dfa::Automaton;
        if let Some(dfa) = &self.dfa
            && let Ok(m) = dfa.try_search_fwd(&regex_automata::Input::new(hay).earliest(true))
        {
            return m.is_some();
        }
        self.regex.is_match(hay)
    }
}

/// A dense DFA for `src` with the regex crate's default syntax, or `None` if the pattern needs
/// more than [`PATTERN_DFA_LIMIT`] or uses what a DFA cannot (Unicode word boundaries).
fn pattern_dfa(src: &str) -> Option<regex_automata::dfa::dense::DFA<Vec<u32>>> {
    use regex_automata::dfa::dense;
    use regex_automata::nfa::thompson;
    use regex_automata::util::syntax;
    dense::Builder::new()
        .syntax(syntax::Config::new().nest_limit(64))
        .thompson(thompson::Config::new().nfa_size_limit(Some(REGEX_SIZE_LIMIT)))
        .configure(
            dense::Config::new()
                .dfa_size_limit(Some(PATTERN_DFA_LIMIT))
                .determinize_size_limit(Some(4 * PATTERN_DFA_LIMIT)),
        )
        .build(src)
        .ok()
}

/// Upstream `ValueValidation` (plus `required`), boxed off the node so that nodes without
/// value validations stay small.
#[derive(Debug, Clone, Default)]
pub struct ValueValidation {
    pub enum_values: Vec<Value>,
    pub maximum: Option<f64>,
    pub exclusive_maximum: bool,
    pub minimum: Option<f64>,
    pub exclusive_minimum: bool,
    pub multiple_of: Option<f64>,
    pub max_length: Option<i64>,
    pub min_length: Option<i64>,
    pub pattern: Option<Pattern>,
    pub max_items: Option<i64>,
    pub min_items: Option<i64>,
    pub unique_items: bool,
    pub max_properties: Option<i64>,
    pub min_properties: Option<i64>,
    pub required: Vec<String>,
    /// For each `required` name, its index in the node's `properties`, or `usize::MAX` if it
    /// is not a declared property (lets the pipeline check presence without map lookups).
    pub required_prop: Vec<usize>,
    /// When every `required` name is one of the first 64 properties of a node with at most
    /// 64 properties: the bit set of their indexes.
    pub required_mask: Option<u64>,
    pub all_of: Vec<Schema>,
    pub any_of: Vec<Schema>,
    pub one_of: Vec<Schema>,
    pub not: Option<Box<Schema>>,
}

/// One node of the compiled structural schema.
#[derive(Debug, Clone)]
pub struct Schema {
    pub ty: Type,
    /// The raw `type` string (for messages when it is not a known type).
    pub type_name: String,
    pub nullable: bool,
    /// The raw `format` string (empty if none).
    pub format_name: String,
    pub format: Option<Format>,
    pub default: Option<Value>,
    /// Properties sorted by name (binary search on lookup).
    pub properties: Vec<(String, Schema)>,
    /// [`key_prefix`] of each property name, parallel to `properties` (cheap ordered
    /// comparisons in the pipeline's merge walk).
    pub prop_prefixes: Vec<u128>,
    pub additional: Option<Additional>,
    pub items: Option<Box<Schema>>,
    pub preserve_unknown: bool,
    pub embedded: bool,
    pub int_or_string: bool,
    pub list_type: Option<ListType>,
    pub list_map_keys: Vec<String>,
    pub v: Option<Box<ValueValidation>>,
    /// Whether this node or any structural descendant is an embedded resource (lets the
    /// embedded-resource pass skip subtrees).
    pub has_embedded: bool,
    /// Whether this node or any structural descendant is a list-type set/map list.
    pub has_set_or_map: bool,
}

impl Default for Schema {
    fn default() -> Self {
        Schema {
            ty: Type::Any,
            type_name: String::new(),
            nullable: false,
            format_name: String::new(),
            format: None,
            default: None,
            properties: Vec::new(),
            prop_prefixes: Vec::new(),
            additional: None,
            items: None,
            preserve_unknown: false,
            embedded: false,
            int_or_string: false,
            list_type: None,
            list_map_keys: Vec::new(),
            v: None,
            has_embedded: false,
            has_set_or_map: false,
        }
    }
}

impl Schema {
    /// The schema of property `name`, if declared.
    pub fn property(&self, name: &str) -> Option<&Schema> {
        self.properties
            .binary_search_by(|(k, _)| k.as_str().cmp(name))
            .ok()
            .map(|i| &self.properties[i].1)
    }

    /// A cursor for looking up the properties of an object whose keys come in sorted order
    /// (serde_json's map): a merge walk instead of one binary search per key.
    pub fn prop_cursor(&self) -> PropCursor<'_> {
        PropCursor {
            props: &self.properties,
            pos: 0,
            last: None,
        }
    }

    /// How property `j` orders against a key with bytes `k` and prefix `kp` (= `key_prefix(k)`).
    #[inline]
    pub fn cmp_prop(&self, j: usize, k: &[u8], kp: u128) -> std::cmp::Ordering {
        let name = self.properties[j].0.as_bytes();
        // (A hand-built node without prefixes falls back to plain comparison.)
        let Some(&pp) = self.prop_prefixes.get(j) else {
            return name.cmp(k);
        };
        if pp != kp {
            return pp.cmp(&kp);
        }
        if name.len() <= 16 && k.len() <= 16 {
            // Equal zero-padded prefixes: the strings differ at most by trailing NULs.
            name.len().cmp(&k.len())
        } else {
            name.cmp(k)
        }
    }

    /// The schema for a map value under `additionalProperties: <schema>`.
    pub fn additional_schema(&self) -> Option<&Schema> {
        match &self.additional {
            Some(Additional::Schema(s)) => Some(s),
            _ => None,
        }
    }
}

/// See [`Schema::prop_cursor`]. Falls back to binary search if keys arrive out of order.
pub struct PropCursor<'a> {
    props: &'a [(String, Schema)],
    pos: usize,
    last: Option<&'a str>,
}

impl<'a> PropCursor<'a> {
    /// The schema of property `k`.
    pub fn get<'k>(&mut self, k: &'k str) -> Option<&'a Schema> {
        if self.props.is_empty() {
            return None;
        }
        if self.last.is_some_and(|l| k < l) {
            return self
                .props
                .binary_search_by(|(p, _)| p.as_str().cmp(k))
                .ok()
                .map(|i| &self.props[i].1);
        }
        while self.pos < self.props.len() && self.props[self.pos].0.as_str() < k {
            self.pos += 1;
        }
        let props: &'a [(String, Schema)] = self.props;
        if self.pos < props.len() {
            self.last = Some(props[self.pos].0.as_str());
            if props[self.pos].0 == k {
                return Some(&props[self.pos].1);
            }
        } else {
            self.last = props.last().map(|(p, _)| p.as_str());
        }
        None
    }
}

/// The first 16 bytes of a key, zero-padded, big-endian: comparing prefixes orders keys
/// lexicographically whenever the prefixes differ.
#[inline]
pub fn key_prefix(k: &[u8]) -> u128 {
    let (hi, lo) = if k.len() >= 8 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&k[..8]);
        (u64::from_be_bytes(b), partial_be(&k[8..]))
    } else {
        (partial_be(k), 0)
    };
    (u128::from(hi) << 64) | u128::from(lo)
}

/// Up to the first 8 bytes of `b` as a big-endian u64, zero-padded.
#[inline]
fn partial_be(b: &[u8]) -> u64 {
    if b.len() >= 8 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        return u64::from_be_bytes(a);
    }
    let mut v = 0u64;
    let mut i = 0;
    if b.len() >= 4 {
        v = u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])) << 32;
        i = 4;
    }
    if b.len() - i >= 2 {
        v |= u64::from(u16::from_be_bytes([b[i], b[i + 1]])) << (48 - 8 * i);
        i += 2;
    }
    if b.len() > i {
        v |= u64::from(b[i]) << (56 - 8 * i);
    }
    v
}

/// Compile error (only hard limits and malformed input; semantic problems are reported by
/// [`crate::crd_schema`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CompileError(pub String);

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CompileError {}

/// Compiles a regex the way the validator uses it, with size limits.
pub fn compile_pattern(src: &str) -> Result<Regex, String> {
    regex::RegexBuilder::new(src)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .nest_limit(64)
        .build()
        .map_err(|e| e.to_string())
}

/// Compiles an `openAPIV3Schema` JSON value into a structural tree.
pub fn compile(schema: &Value) -> Result<Schema, CompileError> {
    let mut ctx = Ctx {
        nodes: 0,
        dfa_budget: SCHEMA_DFA_BUDGET,
    };
    compile_node(schema, 0, &mut ctx)
}

fn as_i64(v: Option<&Value>) -> Option<i64> {
    v.and_then(|v| {
        v.as_i64()
            .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
    })
}

/// Limits tracked while compiling one schema.
struct Ctx {
    nodes: usize,
    dfa_budget: usize,
}

fn compile_node(v: &Value, depth: usize, ctx: &mut Ctx) -> Result<Schema, CompileError> {
    if depth > MAX_SCHEMA_DEPTH {
        return Err(CompileError(format!(
            "schema nesting exceeds the maximum depth of {MAX_SCHEMA_DEPTH}"
        )));
    }
    ctx.nodes += 1;
    if ctx.nodes > MAX_SCHEMA_NODES {
        return Err(CompileError(format!(
            "schema has more than {MAX_SCHEMA_NODES} nodes"
        )));
    }
    let empty = Map::new();
    let m = match v {
        Value::Object(m) => m,
        Value::Bool(_) | Value::Null => &empty,
        _ => return Err(CompileError("schema must be an object".into())),
    };
    let mut s = Schema::default();
    if let Some(t) = m.get("type").and_then(Value::as_str) {
        s.ty = Type::parse(t);
        s.type_name = t.to_string();
    }
    s.nullable = m.get("nullable").and_then(Value::as_bool).unwrap_or(false);
    if let Some(f) = m.get("format").and_then(Value::as_str) {
        s.format_name = f.to_string();
        s.format = Format::parse(f);
    }
    s.default = m.get("default").cloned();
    s.preserve_unknown = m
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    s.embedded = m
        .get("x-kubernetes-embedded-resource")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    s.int_or_string = m
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    s.list_type = match m.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("atomic") => Some(ListType::Atomic),
        Some("set") => Some(ListType::Set),
        Some("map") => Some(ListType::Map),
        _ => None,
    };
    if let Some(Value::Array(keys)) = m.get("x-kubernetes-list-map-keys") {
        s.list_map_keys = keys
            .iter()
            .filter_map(|k| k.as_str().map(str::to_string))
            .collect();
    }
    if let Some(Value::Object(props)) = m.get("properties") {
        let mut ps = Vec::with_capacity(props.len());
        for (k, pv) in props {
            ps.push((k.clone(), compile_node(pv, depth + 1, ctx)?));
        }
        ps.sort_by(|a, b| a.0.cmp(&b.0));
        s.prop_prefixes = ps.iter().map(|(k, _)| key_prefix(k.as_bytes())).collect();
        s.properties = ps;
    }
    match m.get("additionalProperties") {
        Some(Value::Bool(b)) => s.additional = Some(Additional::Bool(*b)),
        Some(ap @ Value::Object(_)) => {
            s.additional = Some(Additional::Schema(Box::new(compile_node(
                ap,
                depth + 1,
                ctx,
            )?)))
        }
        _ => {}
    }
    match m.get("items") {
        Some(it @ Value::Object(_)) => {
            s.items = Some(Box::new(compile_node(it, depth + 1, ctx)?));
        }
        // `items` as an array is forbidden by the CRD checks; compile its first entry
        // leniently so that a schema that slipped through is still bounded.
        Some(Value::Array(a)) if !a.is_empty() => {
            s.items = Some(Box::new(compile_node(&a[0], depth + 1, ctx)?));
        }
        _ => {}
    }

    let mut vv = ValueValidation::default();
    let mut has_v = false;
    if let Some(Value::Array(e)) = m.get("enum") {
        vv.enum_values = e.clone();
        has_v = true;
    }
    if let Some(x) = m.get("maximum").and_then(Value::as_f64) {
        vv.maximum = Some(x);
        has_v = true;
    }
    if let Some(x) = m.get("minimum").and_then(Value::as_f64) {
        vv.minimum = Some(x);
        has_v = true;
    }
    vv.exclusive_maximum = m
        .get("exclusiveMaximum")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    vv.exclusive_minimum = m
        .get("exclusiveMinimum")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if let Some(x) = m.get("multipleOf").and_then(Value::as_f64) {
        vv.multiple_of = Some(x);
        has_v = true;
    }
    for (key, slot) in [
        ("maxLength", &mut vv.max_length),
        ("minLength", &mut vv.min_length),
        ("maxItems", &mut vv.max_items),
        ("minItems", &mut vv.min_items),
        ("maxProperties", &mut vv.max_properties),
        ("minProperties", &mut vv.min_properties),
    ] {
        if let Some(x) = as_i64(m.get(key)) {
            *slot = Some(x);
            has_v = true;
        }
    }
    if let Some(p) = m.get("pattern").and_then(Value::as_str) {
        // An invalid pattern is rejected by the CRD checks; if one gets here it is ignored
        // rather than failing every request.
        if let Ok(pat) = Pattern::new(p, &mut ctx.dfa_budget) {
            vv.pattern = Some(pat);
            has_v = true;
        }
    }
    if m.get("uniqueItems").and_then(Value::as_bool) == Some(true) {
        vv.unique_items = true;
        has_v = true;
    }
    if let Some(Value::Array(r)) = m.get("required") {
        vv.required = r
            .iter()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect();
        has_v |= !vv.required.is_empty();
        vv.required_prop = vv
            .required
            .iter()
            .map(|r| {
                s.properties
                    .binary_search_by(|(k, _)| k.as_str().cmp(r))
                    .unwrap_or(usize::MAX)
            })
            .collect();
        if s.properties.len() <= 64 && vv.required_prop.iter().all(|&j| j < 64) {
            vv.required_mask = Some(vv.required_prop.iter().fold(0, |m, &j| m | (1u64 << j)));
        }
    }
    for (key, slot) in [
        ("allOf", &mut vv.all_of),
        ("anyOf", &mut vv.any_of),
        ("oneOf", &mut vv.one_of),
    ] {
        if let Some(Value::Array(list)) = m.get(key) {
            for j in list {
                slot.push(compile_node(j, depth + 1, ctx)?);
            }
            has_v |= !slot.is_empty();
        }
    }
    if let Some(n @ Value::Object(_)) = m.get("not") {
        vv.not = Some(Box::new(compile_node(n, depth + 1, ctx)?));
        has_v = true;
    }
    if has_v {
        s.v = Some(Box::new(vv));
    }
    let children = || {
        s.properties
            .iter()
            .map(|(_, p)| p)
            .chain(s.items.as_deref())
            .chain(match &s.additional {
                Some(Additional::Schema(a)) => Some(&**a),
                _ => None,
            })
    };
    let has_embedded = s.embedded || children().any(|c| c.has_embedded);
    let has_set_or_map = matches!(s.list_type, Some(ListType::Set | ListType::Map))
        || children().any(|c| c.has_set_or_map);
    s.has_embedded = has_embedded;
    s.has_set_or_map = has_set_or_map;
    Ok(s)
}

/// Finds the `openAPIV3Schema` of version `version` in a CRD (apiextensions.k8s.io/v1 JSON).
pub fn crd_version_schema<'a>(crd: &'a Value, version: &str) -> Option<&'a Value> {
    crd.get("spec")?
        .get("versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(version))?
        .get("schema")?
        .get("openAPIV3Schema")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compiles_extensions_and_validations() {
        let s = compile(&json!({
            "type": "object",
            "properties": {
                "b": {"type": "integer", "maximum": 10, "default": 3},
                "a": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "l": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "d": {"type": "string", "format": "date-time"},
                "u": {"type": "string", "format": "uuid", "pattern": "^a"}
            }
        }))
        .unwrap();
        assert_eq!(s.ty, Type::Object);
        assert_eq!(s.properties[0].0, "a");
        assert!(s.property("a").unwrap().int_or_string);
        assert_eq!(s.property("a").unwrap().v.as_ref().unwrap().any_of.len(), 2);
        let b = s.property("b").unwrap();
        assert_eq!(b.v.as_ref().unwrap().maximum, Some(10.0));
        assert_eq!(b.default, Some(json!(3)));
        let l = s.property("l").unwrap();
        assert_eq!(l.list_type, Some(ListType::Map));
        assert_eq!(l.list_map_keys, vec!["name".to_string()]);
        assert_eq!(s.property("d").unwrap().format, None);
        assert_eq!(s.property("u").unwrap().format, Some(Format::Uuid));
        assert!(s.property("zz").is_none());
    }

    #[test]
    fn prop_cursor_in_and_out_of_order() {
        let s = compile(&json!({"type": "object", "properties": {
            "b": {"type": "string"}, "d": {"type": "integer"}, "f": {"type": "boolean"}}}))
        .unwrap();
        let mut c = s.prop_cursor();
        assert_eq!(c.get("a").map(|x| x.ty), None);
        assert_eq!(c.get("b").map(|x| x.ty), Some(Type::String));
        assert_eq!(c.get("c").map(|x| x.ty), None);
        assert_eq!(c.get("f").map(|x| x.ty), Some(Type::Boolean));
        assert_eq!(c.get("z").map(|x| x.ty), None);
        // out of order (e.g. serde_json with preserve_order): falls back to binary search
        assert_eq!(c.get("d").map(|x| x.ty), Some(Type::Integer));
        assert_eq!(c.get("b").map(|x| x.ty), Some(Type::String));
    }

    #[test]
    fn prefix_comparison_orders_like_strings() {
        let keys = [
            "",
            "a",
            "a\0",
            "a\0\0",
            "ab",
            "abcdefghijklmnop",
            "abcdefghijklmnopq",
            "abcdefghijklmnopq\0",
            "abcdefghijklmnoq",
            "b",
            "\u{ff}",
            "containerPort",
            "containers",
            "apiVersion",
            "metadata",
            "é",
        ];
        let mut props = serde_json::Map::new();
        for k in keys {
            props.insert(k.to_string(), json!({"type": "string"}));
        }
        let s = compile(&json!({"type": "object", "properties": props})).unwrap();
        for k in keys {
            for (j, (p, _)) in s.properties.iter().enumerate() {
                assert_eq!(
                    s.cmp_prop(j, k.as_bytes(), key_prefix(k.as_bytes())),
                    p.as_bytes().cmp(k.as_bytes()),
                    "{p:?} vs {k:?}"
                );
            }
        }
    }

    #[test]
    fn pattern_dfa_agrees_with_regex() {
        let mut budget = SCHEMA_DFA_BUDGET;
        let cases = [
            (
                r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                vec!["http", "a-b", "-a", "", "é", "A"],
            ),
            (
                r"^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$",
                vec!["* * * * */5", "* * * *", "١ * * * *"],
            ),
            (r"b", vec!["abc", "ac", ""]),
            (r"^$", vec!["", "x"]),
            (r"\bfoo\b", vec!["a foo b", "afoob"]),
            (r"(?i)héllo", vec!["HÉLLO", "hello"]),
        ];
        for (src, hays) in cases {
            let p = Pattern::new(src, &mut budget).unwrap();
            for h in hays {
                assert_eq!(p.is_match(h), p.regex.is_match(h), "{src} on {h:?}");
            }
        }
        // Unicode word boundaries are left to the regex engine.
        assert!(Pattern::new(r"\bfoo\b", &mut budget).unwrap().dfa.is_none());
        assert!(Pattern::new("^a", &mut budget).unwrap().dfa.is_some());
        let mut none = 0;
        assert!(Pattern::new("^a", &mut none).unwrap().dfa.is_none());
    }

    #[test]
    fn depth_is_bounded() {
        let mut v = json!({"type": "string"});
        for _ in 0..(MAX_SCHEMA_DEPTH + 5) {
            v = json!({"type": "object", "properties": {"x": v}});
        }
        assert!(compile(&v).is_err());
    }
}
