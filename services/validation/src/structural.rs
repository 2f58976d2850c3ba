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
/// Size limit of the dense DFA a `pattern` is first determinized into (patterns that need a
/// bigger one use the regex engine).
pub const PATTERN_DFA_LIMIT: usize = 256 << 10;
/// Total size of the precompiled pattern DFA tables ([`Pattern`]) of one schema.
pub const SCHEMA_DFA_BUDGET: usize = 8 << 20;

/// Schema `type`. `Any` is the empty type (allowed with int-or-string / preserve-unknown-fields
/// and inside value validations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// No `type` (the empty type).
    Any,
    /// `object`: a JSON object.
    Object,
    /// `array`: a JSON array.
    Array,
    /// `string`: a JSON string.
    String,
    /// `integer`: a number without a fractional part.
    Integer,
    /// `number`: any JSON number (integers too).
    Number,
    /// `boolean`: `true` or `false`.
    Boolean,
    /// A type string upstream does not know (kept for messages, never matches).
    Other,
}

impl Type {
    /// The type of a `type` string ("" is [`Type::Any`]; unknown strings are [`Type::Other`]).
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
    /// `bsonobjectid`: a 24-digit hex BSON ObjectId.
    BsonObjectId,
    /// `uri`: an absolute or relative URI.
    Uri,
    /// `email`: an e-mail address.
    Email,
    /// `hostname`: an RFC 1123 host name.
    Hostname,
    /// `ipv4`: a dotted-quad IPv4 address.
    Ipv4,
    /// `ipv6`: an IPv6 address.
    Ipv6,
    /// `cidr`: an IP network in CIDR notation.
    Cidr,
    /// `mac`: a MAC address.
    Mac,
    /// `uuid`: a UUID of any version.
    Uuid,
    /// `uuid3`: a version 3 UUID.
    Uuid3,
    /// `uuid4`: a version 4 UUID.
    Uuid4,
    /// `uuid5`: a version 5 UUID.
    Uuid5,
    /// `isbn`: an ISBN-10 or ISBN-13.
    Isbn,
    /// `isbn10`: an ISBN-10.
    Isbn10,
    /// `isbn13`: an ISBN-13.
    Isbn13,
    /// `creditcard`: a credit card number.
    CreditCard,
    /// `ssn`: a US social security number.
    Ssn,
    /// `hexcolor`: a `#rgb` or `#rrggbb` colour.
    HexColor,
    /// `rgbcolor`: an `rgb(r,g,b)` colour.
    RgbColor,
    /// `byte`: base64-encoded data.
    Byte,
    /// `password`: any string (a hint only).
    Password,
    /// `date`: an RFC 3339 full-date (`2006-01-02`).
    Date,
    /// `duration`: a duration such as `3h` or `1.5s`.
    Duration,
    /// `datetime`: an RFC 3339 date-time.
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
    /// `atomic`: the list is replaced as a whole.
    Atomic,
    /// `set`: items are unique values (scalars, or atomic lists and maps).
    Set,
    /// `map`: items are objects unique by their `x-kubernetes-list-map-keys`.
    Map,
}

/// `additionalProperties`: a schema, or a bare boolean.
#[derive(Debug, Clone)]
pub enum Additional {
    /// `additionalProperties: true` or `false`.
    Bool(bool),
    /// `additionalProperties: {schema}`: the schema of every other property.
    Schema(Box<Schema>),
}

/// A compiled `pattern`: the source text (for messages), the regex, and — when small enough —
/// the same regex as a precompiled DFA in a compact table (`ByteDfa`), which matches
/// without the regex engine's per-call setup (the same syntax and semantics: both come from
/// regex-automata).
#[derive(Debug, Clone)]
pub struct Pattern {
    /// The `pattern` text as written in the schema.
    pub source: String,
    /// The regex engine, built on first use: only patterns without a DFA ever need it (a
    /// compiled `regex::Regex` costs several KiB, a CRD may have thousands of patterns).
    regex: std::sync::OnceLock<Regex>,
    dfa: Option<ByteDfa>,
}

impl Pattern {
    /// Compiles `src` (see [`compile_pattern`]); `dfa_budget` bounds the DFA memory left for
    /// the schema and is reduced by this pattern's DFA.
    pub fn new(src: &str, dfa_budget: &mut usize) -> Result<Pattern, String> {
        let dfa = pattern_dfa(src).and_then(|d| ByteDfa::from_dense(&d, *dfa_budget));
        let regex = std::sync::OnceLock::new();
        match &dfa {
            Some(d) => *dfa_budget = dfa_budget.saturating_sub(d.memory_usage()),
            // No DFA: the regex engine answers, so the pattern must compile now.
            None => {
                let _ = regex.set(compile_pattern(src)?);
            }
        }
        Ok(Pattern {
            source: src.to_string(),
            regex,
            dfa,
        })
    }

    /// The regex engine for this pattern (built on first use).
    pub fn regex(&self) -> &Regex {
        self.regex.get_or_init(|| {
            // The source compiled when the CRD was checked; the fallback never matches.
            compile_pattern(&self.source)
                .unwrap_or_else(|_| Regex::new(r"a\bz").expect("static regex"))
        })
    }

    /// Whether the pattern matches somewhere in `hay` (Go's `regexp.MatchString`).
    #[inline(always)]
    pub fn is_match(&self, hay: &str) -> bool {
        match &self.dfa {
            Some(d) => d.is_match(hay),
            None => self.regex_match(hay),
        }
    }

    #[inline(never)]
    fn regex_match(&self, hay: &str) -> bool {
        self.regex().is_match(hay)
    }

    /// Whether matching uses the precompiled DFA (else the regex engine).
    pub fn has_dfa(&self) -> bool {
        self.dfa.is_some()
    }
}

/// A pattern's DFA for one question — does the pattern match anywhere in a whole string? —
/// re-encoded from regex-automata's dense DFA into a table whose match loop does one class
/// lookup and one (bounds-checked) table lookup per byte.
///
/// Rows are the live states, columns the DFA's byte equivalence classes plus a last column
/// for the end of input; an entry is the next state's row offset (row × `stride`), or one of
/// two sentinels past the end of the table: [`ByteDfa::DEAD`] (no match can follow) and
/// [`ByteDfa::MATCH`] (a match has ended). Every dense DFA dead state becomes `DEAD` and
/// every match state `MATCH`, so the scan ends at the first lookup from a sentinel (which
/// falls outside the table) and the sentinel is the answer — an earliest-match scan, exactly
/// as the dense DFA answers `is_match`. Only states reachable from the start state of an
/// unanchored search at the start of a string are kept (nothing comes before the string, so
/// that start state is the same for every string).
#[derive(Debug, Clone)]
struct ByteDfa {
    /// The equivalence class (column) of each byte.
    classes: Box<[u8; 256]>,
    /// Row-major transitions (row offsets or sentinels).
    table: Box<[u32]>,
    /// Columns per row: the byte classes, then the end-of-input column.
    stride: usize,
    /// Row offset of the start state (or a sentinel).
    start: u32,
}

impl ByteDfa {
    /// The state after which no match can follow (outside every table).
    const DEAD: u32 = u32::MAX - 1;
    /// The state after which a match has ended (outside every table).
    const MATCH: u32 = u32::MAX;

    /// Re-encodes `d`, or `None` if its table would need more than `budget` bytes, or if
    /// `d` has quit states (none are configured; checked so that a change of configuration
    /// cannot silently change answers).
    fn from_dense(d: &regex_automata::dfa::dense::DFA<Vec<u32>>, budget: usize) -> Option<Self> {
        use regex_automata::dfa::Automaton;
        use regex_automata::util::{primitives::StateID, start};
        use std::collections::HashMap;
        let start = d
            .start_state(&start::Config::new().anchored(regex_automata::Anchored::No))
            .ok()?;
        let bc = d.byte_classes();
        // One representative byte per class, by class index; the last column is the end of
        // input.
        let stride = bc.alphabet_len();
        let mut reps: Vec<Option<u8>> = vec![None; stride];
        let mut classes = Box::new([0u8; 256]);
        for b in 0..=255u8 {
            let c = bc.get(b);
            classes[usize::from(b)] = c;
            reps[usize::from(c)].get_or_insert(b);
        }
        let eoi = stride - 1;
        if stride < 2 || reps[..eoi].iter().any(Option::is_none) {
            return None;
        }
        // Bounded by the budget, and far below the sentinels.
        let max_rows = (budget.saturating_sub(256) / (4 * stride)).min(1 << 22);
        let mut rows: HashMap<StateID, u32> = HashMap::new();
        let mut order: Vec<StateID> = Vec::new();
        // The entry for a dense state, or `None` for a quit state or too many rows.
        let mut entry = |id: StateID, order: &mut Vec<StateID>| -> Option<u32> {
            if d.is_quit_state(id) {
                return None;
            }
            if d.is_dead_state(id) {
                return Some(Self::DEAD);
            }
            if d.is_match_state(id) {
                return Some(Self::MATCH);
            }
            if let Some(&r) = rows.get(&id) {
                return Some(r);
            }
            if order.len() >= max_rows {
                return None;
            }
            let r = u32::try_from(order.len() * stride).ok()?;
            rows.insert(id, r);
            order.push(id);
            Some(r)
        };
        let start = entry(start, &mut order)?;
        let mut table: Vec<u32> = Vec::new();
        let mut next = 0;
        while next < order.len() {
            let id = order[next];
            next += 1;
            for (c, rep) in reps.iter().enumerate() {
                let to = match rep {
                    Some(b) if c != eoi => d.next_state(id, *b),
                    _ => d.next_eoi_state(id),
                };
                table.push(entry(to, &mut order)?);
            }
        }
        Some(ByteDfa {
            classes,
            table: table.into_boxed_slice(),
            stride,
            start,
        })
    }

    /// Heap bytes held (counted against the schema's DFA budget).
    fn memory_usage(&self) -> usize {
        256 + 4 * self.table.len()
    }

    /// Whether the pattern matches somewhere in `hay`.
    #[inline(always)]
    fn is_match(&self, hay: &str) -> bool {
        let (table, classes) = (&self.table[..], &*self.classes);
        let step = |s: u32, b: u8| table.get(s as usize + usize::from(classes[usize::from(b)]));
        let mut s = self.start;
        // Two bytes per round; a lookup from a sentinel fails and ends the scan.
        let (pairs, rest) = hay.as_bytes().as_chunks::<2>();
        for &[b0, b1] in pairs {
            let Some(&n) = step(s, b0) else { break };
            let Some(&n) = step(n, b1) else {
                s = n;
                break;
            };
            s = n;
        }
        for &b in rest {
            if let Some(&n) = step(s, b) {
                s = n;
            }
        }
        if s < Self::DEAD {
            // The end of input (always a sentinel).
            s = table
                .get(s as usize + self.stride - 1)
                .copied()
                .unwrap_or(Self::DEAD);
        }
        s == Self::MATCH
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
    /// `enum`: the allowed values (empty = any).
    pub enum_values: Vec<Value>,
    /// `maximum`: the largest allowed number.
    pub maximum: Option<f64>,
    /// `exclusiveMaximum`: `maximum` itself is not allowed.
    pub exclusive_maximum: bool,
    /// `minimum`: the smallest allowed number.
    pub minimum: Option<f64>,
    /// `exclusiveMinimum`: `minimum` itself is not allowed.
    pub exclusive_minimum: bool,
    /// `multipleOf`: numbers must be a multiple of it.
    pub multiple_of: Option<f64>,
    /// `maxLength` of strings, in characters.
    pub max_length: Option<i64>,
    /// `minLength` of strings, in characters.
    pub min_length: Option<i64>,
    /// Shared by every node of the schema with the same pattern source.
    pub pattern: Option<std::sync::Arc<Pattern>>,
    /// `maxItems` of arrays.
    pub max_items: Option<i64>,
    /// `minItems` of arrays.
    pub min_items: Option<i64>,
    /// `uniqueItems`: array items must be pairwise distinct.
    pub unique_items: bool,
    /// `maxProperties` of objects.
    pub max_properties: Option<i64>,
    /// `minProperties` of objects.
    pub min_properties: Option<i64>,
    /// `required`: property names that must be present.
    pub required: Vec<String>,
    /// For each `required` name, its index in the node's `properties`, or `usize::MAX` if it
    /// is not a declared property (lets the pipeline check presence without map lookups).
    pub required_prop: Vec<usize>,
    /// When every `required` name is one of the first 64 properties of a node with at most
    /// 64 properties: the bit set of their indexes.
    pub required_mask: Option<u64>,
    /// `allOf`: the value must match every schema.
    pub all_of: Vec<Schema>,
    /// `anyOf`: the value must match at least one schema.
    pub any_of: Vec<Schema>,
    /// `oneOf`: the value must match exactly one schema.
    pub one_of: Vec<Schema>,
    /// `not`: the value must not match the schema.
    pub not: Option<Box<Schema>>,
}

/// Kind bit of JSON `null`. The `K_*` constants are the value kinds as bits, for
/// [`Plan::quick`] ([`kind_bit`]).
pub const K_NULL: u8 = 1;
/// Kind bit of a JSON boolean.
pub const K_BOOL: u8 = 2;
/// A number serde_json holds as an integer (`i64`/`u64`).
pub const K_INT: u8 = 4;
/// A number serde_json holds as a float.
pub const K_FLOAT: u8 = 8;
/// Kind bit of a JSON string.
pub const K_STRING: u8 = 16;
/// Kind bit of a JSON array.
pub const K_ARRAY: u8 = 32;
/// Kind bit of a JSON object.
pub const K_OBJECT: u8 = 64;
const K_ALL_NON_NULL: u8 = K_BOOL | K_INT | K_FLOAT | K_STRING | K_ARRAY | K_OBJECT;

/// The kind bit of a JSON value (see [`Plan::quick`]).
#[inline(always)]
pub fn kind_bit(v: &Value) -> u8 {
    match v {
        Value::Null => K_NULL,
        Value::Bool(_) => K_BOOL,
        Value::Number(n) => {
            if n.is_f64() {
                K_FLOAT
            } else {
                K_INT
            }
        }
        Value::String(_) => K_STRING,
        Value::Array(_) => K_ARRAY,
        Value::Object(_) => K_OBJECT,
    }
}

/// Facts about a node computed once by [`compile`], so that the per-request walk
/// ([`crate::pipeline`]) and [`crate::validate::is_valid`] skip work that cannot report
/// anything. `Plan::default()` is the conservative plan (nothing is skipped, defaults are
/// computed and validated on use), so a node built by hand is still handled exactly.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Bit set of the value kinds ([`kind_bit`]) for which this node's *own* checks (type,
    /// nullable, format, enum, allOf/anyOf/oneOf/not, string/number bounds and pattern,
    /// min/maxItems, uniqueItems, min/maxProperties, required) cannot fail: the type
    /// accepts the kind and no value validation applies to it. Children (items,
    /// properties, additionalProperties) are not covered.
    pub quick: u8,
    /// `default` with the defaults below it applied: the value defaulting inserts for a
    /// missing or non-nullable `null` field.
    pub default: Option<Value>,
    /// Whether [`Plan::default`] validates against this node.
    pub default_ok: bool,
    /// Bit set of the value kinds the node's type certainly accepts (a float under an
    /// integer type is left out: it is checked the slow way).
    pub types: u8,
    /// Whether the node has allOf/anyOf/oneOf/not.
    pub junctors: bool,
    /// Indexes of the properties that have a default.
    pub defaulted: Vec<usize>,
    /// Value kinds (strings, numbers) whose only checks at this node are the bounds below:
    /// a string passes when its byte length is within `str_bytes` (maxLength counts
    /// characters, never more than bytes; minLength is certain once bytes >= 4 * min - 3),
    /// a number when it is within `num` (inclusive minimum/maximum).
    pub ranged: u8,
    /// With `ranged` strings: the (min, max) byte lengths that certainly pass.
    pub str_bytes: (usize, usize),
    /// With `ranged` numbers: the inclusive (min, max) range that certainly passes.
    pub num: (f64, f64),
    /// With `ranged` strings: also match this node's `pattern`.
    pub str_pattern: bool,
    /// When an object's only own check is `required` over the first 64 properties: their
    /// bit set (by property index).
    pub required_only: Option<u64>,
}

/// [`Plan::types`] of a node (see there).
fn type_kinds(s: &Schema) -> u8 {
    if s.int_or_string {
        K_INT | K_STRING
    } else {
        match s.ty {
            Type::Any => K_ALL_NON_NULL,
            Type::Object => K_OBJECT,
            Type::Array => K_ARRAY,
            Type::String => K_STRING,
            Type::Integer => K_INT,
            Type::Number => K_INT | K_FLOAT,
            Type::Boolean => K_BOOL,
            Type::Other => 0,
        }
    }
}

/// [`Plan::quick`] of a node (see there).
fn quick_kinds(s: &Schema) -> u8 {
    let typed = s.int_or_string || s.ty != Type::Any;
    let v = s.v.as_deref();
    let no_enum = v.is_none_or(|v| v.enum_values.is_empty());
    let mut quick = 0;
    // A null is only checked for its type (nullable) and enum, before anything else.
    if (!typed || s.nullable) && no_enum {
        quick |= K_NULL;
    }
    if !no_enum || has_junctors(s) {
        return quick;
    }
    let mut unchecked = K_BOOL;
    if s.format.is_none()
        && v.is_none_or(|v| v.max_length.is_none() && v.min_length.is_none() && v.pattern.is_none())
    {
        unchecked |= K_STRING;
    }
    if v.is_none_or(|v| v.multiple_of.is_none() && v.minimum.is_none() && v.maximum.is_none()) {
        unchecked |= K_INT | K_FLOAT;
    }
    if v.is_none_or(|v| v.min_items.is_none() && v.max_items.is_none() && !v.unique_items) {
        unchecked |= K_ARRAY;
    }
    if v.is_none_or(|v| {
        v.min_properties.is_none() && v.max_properties.is_none() && v.required.is_empty()
    }) {
        unchecked |= K_OBJECT;
    }
    quick | (type_kinds(s) & unchecked)
}

fn has_junctors(s: &Schema) -> bool {
    s.v.as_deref().is_some_and(|v| {
        !v.any_of.is_empty() || !v.one_of.is_empty() || !v.all_of.is_empty() || v.not.is_some()
    })
}

/// The range rules of [`Plan::ranged`] and [`Plan::required_only`].
fn range_rules(s: &Schema, plan: &mut Plan) {
    let types = type_kinds(s);
    let Some(v) = s.v.as_deref() else { return };
    if has_junctors(s) || !v.enum_values.is_empty() {
        return;
    }
    // (A negative maxLength rejects every string: left to the exact check.)
    if types & K_STRING != 0 && s.format.is_none() && v.max_length.is_none_or(|m| m >= 0) {
        let lo = match v.min_length {
            Some(min) if min > 0 => {
                usize::try_from(min.saturating_mul(4) - 3).unwrap_or(usize::MAX)
            }
            _ => 0,
        };
        let hi = v
            .max_length
            .map_or(usize::MAX, |max| usize::try_from(max).unwrap_or(usize::MAX));
        plan.ranged |= K_STRING;
        plan.str_bytes = (lo, hi);
        plan.str_pattern = v.pattern.is_some();
    }
    if types & (K_INT | K_FLOAT) != 0
        && v.multiple_of.is_none()
        && !(v.minimum.is_some() && v.exclusive_minimum)
        && !(v.maximum.is_some() && v.exclusive_maximum)
    {
        plan.ranged |= types & (K_INT | K_FLOAT);
        plan.num = (
            v.minimum.unwrap_or(f64::NEG_INFINITY),
            v.maximum.unwrap_or(f64::INFINITY),
        );
    }
    if types & K_OBJECT != 0 && v.min_properties.is_none() && v.max_properties.is_none() {
        plan.required_only = v.required_mask;
    }
}

/// Fills in a compiled node's [`Plan`] (its children's plans must be complete).
fn plan_node(s: &mut Schema) {
    s.plan.quick = quick_kinds(s);
    s.plan.types = type_kinds(s);
    s.plan.junctors = has_junctors(s);
    let mut plan = std::mem::take(&mut s.plan);
    range_rules(s, &mut plan);
    s.plan = plan;
    s.plan.defaulted = (s.properties.iter().enumerate())
        .filter(|(_, (_, p))| p.default.is_some())
        .map(|(i, _)| i)
        .collect();
    if let Some(d) = &s.default {
        let mut filled = d.clone();
        crate::default::apply_defaults(&mut filled, s);
        s.plan.default_ok = crate::validate::is_valid(s, &filled);
        s.plan.default = Some(filled);
    }
}

/// One node of the compiled structural schema.
#[derive(Debug, Clone)]
pub struct Schema {
    /// The node's `type`.
    pub ty: Type,
    /// The raw `type` string (for messages when it is not a known type).
    pub type_name: String,
    /// `nullable`: `null` is a valid value here.
    pub nullable: bool,
    /// The raw `format` string (empty if none).
    pub format_name: String,
    /// The `format` when the CR validator checks it (`None`: absent or stripped as upstream does).
    pub format: Option<Format>,
    /// `default`: the value defaulting sets for a missing field.
    pub default: Option<Value>,
    /// Properties sorted by name (binary search on lookup).
    pub properties: Vec<(String, Schema)>,
    /// [`KeyWords`] of each property name, parallel to `properties` (cheap equality tests
    /// in the pipeline's merge walk).
    pub prop_keys: Vec<KeyWords>,
    /// `additionalProperties`, if set.
    pub additional: Option<Additional>,
    /// `items`: the schema of array items.
    pub items: Option<Box<Schema>>,
    /// `x-kubernetes-preserve-unknown-fields`: unknown fields are kept, not pruned.
    pub preserve_unknown: bool,
    /// `x-kubernetes-embedded-resource`: the value is a Kubernetes object (apiVersion, kind,
    /// metadata).
    pub embedded: bool,
    /// `x-kubernetes-int-or-string`: an integer or a string.
    pub int_or_string: bool,
    /// `x-kubernetes-list-type`, if set.
    pub list_type: Option<ListType>,
    /// `x-kubernetes-list-map-keys`: the keys that identify an item of a `map` list.
    pub list_map_keys: Vec<String>,
    /// The value validations, if the node has any.
    pub v: Option<Box<ValueValidation>>,
    /// Whether this node or any structural descendant is an embedded resource (lets the
    /// embedded-resource pass skip subtrees).
    pub has_embedded: bool,
    /// Whether this node or any structural descendant is a list-type set/map list.
    pub has_set_or_map: bool,
    /// What the pipeline may skip at this node (derived by [`compile`]).
    pub plan: Plan,
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
            prop_keys: Vec::new(),
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
            plan: Plan::default(),
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

/// A key's length and two machine words covering its first and last bytes (overlapping
/// loads; for keys of up to 16 bytes they cover every byte): two keys of at most 16 bytes
/// are equal exactly when their `KeyWords` are. Longer keys also need a full comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeyWords {
    /// Length of the key in bytes.
    pub len: usize,
    /// Its first 8 (or, under 8 bytes, 4) bytes as a little-endian word; under 4 bytes, its
    /// first, middle and last byte.
    pub first: u64,
    /// Its last 8 (or, under 8 bytes, 4) bytes as a little-endian word; 0 under 4 bytes.
    pub last: u64,
}

impl KeyWords {
    /// The words of key `k`.
    #[inline(always)]
    pub fn of(k: &[u8]) -> KeyWords {
        let n = k.len();
        let w64 = |b: &[u8]| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
        let w32 = |b: &[u8]| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        let (first, last) = if n >= 8 {
            (w64(&k[..8]), w64(&k[n - 8..]))
        } else if n >= 4 {
            (w32(&k[..4]), w32(&k[n - 4..]))
        } else if n > 0 {
            let b = |i: usize| u64::from(k[i]);
            (b(0) | (b(n / 2) << 8) | (b(n - 1) << 16), 0)
        } else {
            (0, 0)
        };
        KeyWords {
            len: n,
            first,
            last,
        }
    }

    /// The key's first byte (0 for the empty key).
    #[inline(always)]
    pub fn first0(&self) -> u8 {
        self.first as u8
    }
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
        patterns: Default::default(),
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
    /// Patterns compiled so far, by source: generated CRDs repeat the same few patterns
    /// (names, quantities, durations) thousands of times.
    patterns: std::collections::HashMap<String, std::sync::Arc<Pattern>>,
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
        s.prop_keys = ps.iter().map(|(k, _)| KeyWords::of(k.as_bytes())).collect();
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
        let shared = ctx.patterns.get(p).cloned();
        let pat = match shared {
            Some(pat) => Some(pat),
            None => Pattern::new(p, &mut ctx.dfa_budget).ok().map(|pat| {
                let pat = std::sync::Arc::new(pat);
                ctx.patterns.insert(p.to_string(), pat.clone());
                pat
            }),
        };
        if let Some(pat) = pat {
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
    plan_node(&mut s);
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

// ---- heap size estimate (for the byte-bounded schema cache) -------------------------------

/// Estimated heap bytes of a compiled `regex::Regex` (its NFAs and engines; the regex crate
/// does not report its memory). Measured for typical CRD patterns by
/// `tests/schema_memory.rs`.
pub const REGEX_HEAP_ESTIMATE: usize = 12 << 10;

/// Estimated heap bytes of the map entry overhead of a serde_json object (BTreeMap node
/// share per entry).
const MAP_ENTRY_OVERHEAD: usize = 16;

/// Estimated heap bytes owned by a JSON value (not counting the value itself).
pub fn value_heap(v: &Value) -> usize {
    match v {
        Value::String(s) => s.capacity(),
        Value::Array(a) => {
            a.capacity() * std::mem::size_of::<Value>() + a.iter().map(value_heap).sum::<usize>()
        }
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| {
                std::mem::size_of::<String>()
                    + std::mem::size_of::<Value>()
                    + MAP_ENTRY_OVERHEAD
                    + k.capacity()
                    + value_heap(v)
            })
            .sum(),
        _ => 0,
    }
}

fn strings_heap(v: &[String], cap: usize) -> usize {
    cap * std::mem::size_of::<String>() + v.iter().map(String::capacity).sum::<usize>()
}

impl Pattern {
    /// Estimated heap bytes of this pattern (source, DFA table, or the regex engine that
    /// patterns without a DFA build).
    pub fn heap_size(&self) -> usize {
        std::mem::size_of::<Pattern>()
            + self.source.capacity()
            + match &self.dfa {
                Some(d) => d.memory_usage(),
                None => REGEX_HEAP_ESTIMATE,
            }
    }
}

impl Schema {
    /// Estimated heap bytes of the whole compiled tree rooted here, this node included:
    /// computed once when a schema enters the cache, to bound the cache by bytes.
    pub fn heap_size(&self) -> usize {
        self.tree_heap(&mut Default::default())
    }

    fn tree_heap(&self, seen: &mut std::collections::HashSet<usize>) -> usize {
        std::mem::size_of::<Schema>() + self.owned_heap(seen)
    }

    /// Heap bytes this node owns (its children's nodes included), not the node itself;
    /// shared patterns are counted once (`seen`).
    fn owned_heap(&self, seen: &mut std::collections::HashSet<usize>) -> usize {
        let node = std::mem::size_of::<Schema>();
        let mut n = self.type_name.capacity() + self.format_name.capacity();
        n += self.default.as_ref().map_or(0, value_heap);
        n += self.properties.capacity() * std::mem::size_of::<(String, Schema)>();
        for (k, s) in &self.properties {
            n += k.capacity() + s.owned_heap(seen);
        }
        n += self.prop_keys.capacity() * std::mem::size_of::<KeyWords>();
        if let Some(Additional::Schema(s)) = &self.additional {
            n += s.tree_heap(seen);
        }
        n += self.items.as_ref().map_or(0, |s| s.tree_heap(seen));
        n += strings_heap(&self.list_map_keys, self.list_map_keys.capacity());
        if let Some(v) = &self.v {
            n += std::mem::size_of::<ValueValidation>();
            n += v.enum_values.capacity() * std::mem::size_of::<Value>()
                + v.enum_values.iter().map(value_heap).sum::<usize>();
            if let Some(p) = &v.pattern
                && seen.insert(std::sync::Arc::as_ptr(p) as usize)
            {
                n += 2 * std::mem::size_of::<usize>() + p.heap_size();
            }
            n += strings_heap(&v.required, v.required.capacity());
            n += v.required_prop.capacity() * std::mem::size_of::<usize>();
            for list in [&v.all_of, &v.any_of, &v.one_of] {
                n += list.capacity() * node;
                for s in list {
                    n += s.owned_heap(seen);
                }
            }
            n += v.not.as_ref().map_or(0, |s| s.tree_heap(seen));
        }
        n += self.plan.default.as_ref().map_or(0, value_heap);
        n += self.plan.defaulted.capacity() * std::mem::size_of::<usize>();
        n
    }
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
    fn key_words_equal_exactly_when_short_keys_are_equal() {
        let mut keys: Vec<String> = [
            "",
            "a",
            "a\0",
            "\0",
            "\0\0",
            "ab",
            "ba",
            "aba",
            "abb",
            "abc",
            "abcd",
            "abce",
            "bbcd",
            "abcde",
            "abxde",
            "abcdefg",
            "abcdefh",
            "xbcdefg",
            "abcdefgh",
            "abcdefghijklmnop",
            "abcdefghijklmnoq",
            "bbcdefghijklmnop",
            "abcdefghijklmnopq",
            "abcdefghijklmnopr",
            "containerPort",
            "containers",
            "é",
            "éa",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Every length up to 17 with one differing byte at each position.
        for n in 0..=17usize {
            let base: String = "abcdefghijklmnopq"[..n].to_string();
            for i in 0..n {
                let mut b = base.clone().into_bytes();
                b[i] = b'Z';
                keys.push(String::from_utf8(b).unwrap());
            }
            keys.push(base);
        }
        for a in &keys {
            for b in &keys {
                let (wa, wb) = (KeyWords::of(a.as_bytes()), KeyWords::of(b.as_bytes()));
                assert_eq!(wa.len, a.len());
                if a.len() <= 16 && b.len() <= 16 {
                    assert_eq!(wa == wb, a == b, "{a:?} vs {b:?}");
                } else if a == b {
                    assert_eq!(wa, wb);
                }
            }
        }
    }

    #[test]
    fn plans_record_what_each_node_can_skip() {
        let s = compile(&json!({"type": "object", "required": ["b"], "properties": {
            "a": {"type": "string"},
            "b": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
            "c": {"type": "string", "maxLength": 5, "minLength": 2, "pattern": "^x"},
            "d": {"type": "number", "minimum": 0, "exclusiveMinimum": true},
            "e": {"type": "string", "enum": ["A"], "default": "B"},
            "f": {"type": "string", "nullable": true},
            "g": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "h": {"type": "object", "default": {}, "properties": {"i": {"type": "string", "default": "I"}}},
            "j": {}
        }}))
        .unwrap();
        let p = |k: &str| &s.property(k).unwrap().plan;
        assert_eq!(s.plan.quick, 0, "required: not quick");
        assert_eq!(s.plan.required_only, Some(1 << 1));
        assert_eq!(s.plan.defaulted, vec![1, 4, 7]);
        assert_eq!(p("a").quick, K_STRING);
        assert_eq!((p("a").ranged, p("a").types), (0, K_STRING));
        assert_eq!(p("b").quick, 0);
        assert_eq!((p("b").ranged, p("b").num), (K_INT, (1.0, 10.0)));
        assert_eq!(
            (p("b").default.clone(), p("b").default_ok),
            (Some(json!(3)), true)
        );
        assert_eq!(p("c").ranged, K_STRING);
        assert_eq!((p("c").str_bytes, p("c").str_pattern), ((5, 5), true));
        assert_eq!(p("d").ranged, 0, "exclusive bounds go the exact way");
        assert_eq!(
            (p("e").quick, p("e").ranged, p("e").default_ok),
            (0, 0, false)
        );
        assert_eq!(p("f").quick, K_NULL | K_STRING);
        assert!(p("g").junctors);
        assert_eq!((p("g").quick, p("g").types), (0, K_INT | K_STRING));
        assert_eq!(p("h").default, Some(json!({"i": "I"})));
        assert!(p("h").default_ok);
        assert_eq!(p("j").quick, K_NULL | K_ALL_NON_NULL);
        // A node built by hand has the conservative plan: nothing is skipped.
        assert_eq!(Schema::default().plan.quick, 0);
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
                assert_eq!(p.is_match(h), p.regex().is_match(h), "{src} on {h:?}");
            }
        }
        // Unicode word boundaries are left to the regex engine.
        assert!(!Pattern::new(r"\bfoo\b", &mut budget).unwrap().has_dfa());
        assert!(Pattern::new("^a", &mut budget).unwrap().has_dfa());
        let mut none = 0;
        assert!(!Pattern::new("^a", &mut none).unwrap().has_dfa());
    }

    /// The compact DFA answers exactly as the regex on every string over an alphabet of
    /// ASCII, multi-byte and invalid-for-the-pattern characters: all strings up to length 3,
    /// then pseudo-random longer ones (odd and even lengths: the scan goes by byte pairs).
    #[test]
    fn byte_dfa_agrees_with_regex_exhaustively() {
        let patterns = [
            r"^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$",
            r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            r"a",
            r"ab|ba",
            r"^a",
            r"a$",
            r"^$",
            r"",
            r"a*",
            r"^.$",
            r"^[^a]+$",
            r"(?i)é",
            r"\d{2}",
            r"^\s*$",
            r"(?m)^b$",
            r"(?-u)\bab\b",
        ];
        let alphabet = [
            "a", "b", "1", "*", "/", " ", "-", "é", "١", "\u{2003}", "\n", "A",
        ];
        let mut hays: Vec<String> = vec![String::new()];
        let mut layer: Vec<String> = vec![String::new()];
        for _ in 0..3 {
            layer = layer
                .iter()
                .flat_map(|h| alphabet.iter().map(move |c| format!("{h}{c}")))
                .collect();
            hays.extend(layer.iter().cloned());
        }
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..2000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 24) as usize;
            let h: String = (0..len)
                .map(|i| alphabet[((seed >> (i % 50)) as usize + i * 7) % alphabet.len()])
                .collect();
            hays.push(h);
        }
        hays.push("* * * * */5".into());
        hays.push("1 2 3 4 5".into());
        hays.push("1 2 3 4 5 6".into());
        for src in patterns {
            let mut budget = SCHEMA_DFA_BUDGET;
            let p = Pattern::new(src, &mut budget).unwrap();
            assert!(p.has_dfa(), "{src}");
            for h in &hays {
                assert_eq!(p.is_match(h), p.regex().is_match(h), "{src} on {h:?}");
            }
        }
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
