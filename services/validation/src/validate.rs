//! Schema validation of a (pruned, defaulted) custom resource: every OpenAPI v3 keyword CRDs
//! allow, all errors collected, with upstream's exact field paths and messages.
//!
//! Follows the kube-openapi validator (k8s.io/kube-openapi pkg/validation/validate: schema.go's
//! validator order type → allOf/anyOf/oneOf/not → string → format → number → slice → enum →
//! object; type.go, validator.go, object_validator.go, slice_validator.go,
//! schema_props.go; messages from pkg/validation/errors/schema.go) as converted to field errors
//! by k8s.io/apiextensions-apiserver pkg/apiserver/validation/validation.go
//! (`kubeOpenAPIResultToFieldErrors`). Then the x-kubernetes-list-type set/map uniqueness
//! (pkg/apiserver/schema/listtype/validation.go) and embedded-resource checks
//! (pkg/apiserver/schema/objectmeta/validation.go) run as separate passes, as in upstream's
//! customResourceStrategy.Validate.

use crate::formats;
use crate::structural::{Additional, K_ARRAY, K_OBJECT, ListType, Schema, Type, kind_bit};
use crdplane_core::field::{go_float, go_quote};
use crdplane_core::{FieldError, FieldErrorType};
use serde_json::{Map, Value};

/// Field path of an error named `name` by the kube-openapi validator: the name with a leading
/// "." trimmed; an empty name (or ".") is upstream's nil path, printed `<nil>`.
pub(crate) fn err_path(name: &str) -> String {
    if name.is_empty() || name == "." {
        "<nil>".to_string()
    } else {
        name.strip_prefix('.').unwrap_or(name).to_string()
    }
}

/// Appends `[i]` without the formatting machinery (hot path).
pub(crate) fn push_index(s: &mut String, i: usize) {
    s.push('[');
    let mut buf = [0u8; 20];
    let mut n = i;
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &b in &buf[at..] {
        s.push(b as char);
    }
    s.push(']');
}

fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) => {
            if n.is_i64() || n.is_u64() {
                "integer"
            } else {
                "number"
            }
        }
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The Go `format` strfmt infers for a decoded JSON value (type.go `schemaInfoForType`).
fn data_format(v: &Value) -> &'static str {
    match v {
        Value::Number(n) if n.is_i64() || n.is_u64() => "int64",
        Value::Number(_) => "double",
        _ => "",
    }
}

fn as_f64(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// swag.IsFloat64AJSONInteger.
fn is_json_integer(f: f64) -> bool {
    const MAX: f64 = 9007199254740991.0;
    if !f.is_finite() || !(-MAX..=MAX).contains(&f) {
        return false;
    }
    if f == f.trunc() {
        return true;
    }
    let g = f.round();
    (f - g).abs() < 1e-9 * g.abs().max(1.0)
}

fn body_msg(name: &str, rest: &str) -> String {
    format!("{name} in body {rest}")
}

/// Collected validation errors plus the "match count" kube-openapi uses to pick the best
/// failing alternative of anyOf/oneOf.
struct Res {
    errs: Vec<FieldError>,
    matches: u32,
}

impl Res {
    fn new() -> Self {
        Res {
            errs: Vec::new(),
            matches: 0,
        }
    }
    fn merge(&mut self, o: Res) {
        if !o.errs.is_empty() {
            if self.errs.is_empty() {
                self.errs = o.errs;
            } else {
                self.errs.extend(o.errs);
            }
        }
        self.matches += o.matches;
    }
}

fn invalid(name: &str, value: Value, msg: String) -> FieldError {
    FieldError::new(FieldErrorType::Invalid, err_path(name), Some(value), msg)
}

fn type_invalid(name: &str, type_name: &str, actual: &str) -> FieldError {
    FieldError::new(
        FieldErrorType::TypeInvalid,
        err_path(name),
        Some(Value::String(actual.to_string())),
        body_msg(
            name,
            &format!("must be of type {type_name}: {}", go_quote(actual)),
        ),
    )
}

fn too_many(name: &str, actual: usize, max: i64) -> FieldError {
    let unit = if max == 1 { "item" } else { "items" };
    FieldError::new(
        FieldErrorType::TooMany,
        err_path(name),
        Some(Value::from(actual as i64)),
        format!("must have at most {max} {unit}"),
    )
}

/// Composite (non-field) kube-openapi errors become `field.Invalid(nil, "", msg)`.
fn composite(msg: String) -> FieldError {
    FieldError::new(
        FieldErrorType::Invalid,
        "<nil>",
        Some(Value::String(String::new())),
        msg,
    )
}

/// Whether `v` has the schema's type (int-or-string: an integer or a string); only meaningful
/// for typed schemas.
#[inline]
pub(crate) fn schema_type_matches(s: &Schema, v: &Value) -> bool {
    if s.int_or_string {
        type_matches(Type::Integer, v) || v.is_string()
    } else {
        type_matches(s.ty, v)
    }
}

/// The type error of a non-null value under a typed schema (type.go), if any.
pub(crate) fn type_error(s: &Schema, data: &Value, name: &str) -> Option<FieldError> {
    let types_name: &str = if s.int_or_string {
        "integer,string"
    } else {
        &s.type_name
    };
    let matches = schema_type_matches(s, data);
    let is_scalar_non_string = !matches!(data, Value::String(_) | Value::Array(_));
    // A supported string `format` on a non-string value: "must be of type <format>".
    if is_scalar_non_string
        && s.format.is_some()
        && !(matches || data_format(data) == s.format_name)
    {
        Some(type_invalid(name, &s.format_name, data_format(data)))
    } else if !matches {
        Some(type_invalid(name, types_name, json_type_name(data)))
    } else {
        None
    }
}

/// Whether a schema is typed (has a type, or is int-or-string).
#[inline]
pub(crate) fn is_typed(s: &Schema) -> bool {
    s.int_or_string || s.ty != Type::Any
}

#[inline]
fn type_matches(t: Type, v: &Value) -> bool {
    match (t, v) {
        (Type::Object, Value::Object(_)) => true,
        (Type::Array, Value::Array(_)) => true,
        (Type::String, Value::String(_)) => true,
        (Type::Boolean, Value::Bool(_)) => true,
        (Type::Number, Value::Number(_)) => true,
        (Type::Integer, Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(is_json_integer)
        }
        _ => false,
    }
}

/// Validates `data` against `s`; `name` is the kube-openapi path ("" at the root).
fn validate_node(s: &Schema, data: &Value, name: &mut String, depth: usize) -> Res {
    let mut res = Res::new();
    res.matches += 1;
    if depth > 512 {
        res.errs.push(FieldError::internal(
            err_path(name),
            "object nesting is too deep",
        ));
        return res;
    }
    let typed = is_typed(s);

    if data.is_null() {
        if typed && !s.nullable {
            let types_name: &str = if s.int_or_string {
                "integer,string"
            } else {
                &s.type_name
            };
            res.errs.push(type_invalid(name, types_name, "null"));
        }
        if let Some(v) = &s.v
            && !v.enum_values.is_empty()
        {
            res.errs.push(enum_fail(name, data, &v.enum_values));
        }
        return res;
    }

    // 1. type
    if typed {
        if let Some(e) = type_error(s, data, name) {
            res.errs.push(e);
        }
        res.matches += 1;
    }

    let Some(v) = s.v.as_deref() else {
        // No value validations: only structure remains.
        validate_structure(s, None, data, name, depth, &mut res);
        return res;
    };

    // 2. allOf / anyOf / oneOf / not
    if has_junctors(v) {
        validate_junctors(v, data, name, depth, &mut res);
    }

    match data {
        // 3. string, 4. format
        Value::String(st) => {
            res.matches += 1;
            if let Some(e) = string_checks(v, st, name) {
                res.errs.push(e);
            }
        }
        // 5. number
        Value::Number(_) => {
            res.matches += 1;
            number_checks(v, data, name, &mut res.errs);
        }
        _ => {}
    }
    validate_structure(s, Some(v), data, name, depth, &mut res);
    res
}

/// Whether a node has allOf/anyOf/oneOf/not.
#[inline]
pub(crate) fn has_junctors(v: &crate::structural::ValueValidation) -> bool {
    !v.any_of.is_empty() || !v.one_of.is_empty() || !v.all_of.is_empty() || v.not.is_some()
}

fn validate_format(s: &Schema, data: &Value, name: &str, res: &mut Res) {
    if let (Some(f), Value::String(st)) = (s.format, data)
        && !formats::check(f, st)
    {
        res.errs.push(type_invalid(name, &s.format_name, st));
    }
}

/// Slice validator, enum and object validator (with the format check, which in upstream runs
/// between string and number validators; it is independent of them).
fn validate_structure(
    s: &Schema,
    v: Option<&crate::structural::ValueValidation>,
    data: &Value,
    name: &mut String,
    depth: usize,
    res: &mut Res,
) {
    validate_format(s, data, name, res);
    match data {
        Value::Array(a) => {
            res.matches += 1;
            if let Some(items) = s.items.as_deref() {
                let base = name.len();
                for (i, x) in a.iter().enumerate() {
                    push_index(name, i);
                    let r = validate_node(items, x, name, depth + 1);
                    res.merge(r);
                    name.truncate(base);
                }
            }
            if let Some(v) = v {
                array_errors(v, a, name, &mut res.errs);
            }
        }
        Value::Object(m) => {
            if let Some(v) = v
                && !v.enum_values.is_empty()
            {
                enum_check(v, data, name, res);
            }
            validate_object(s, v, m, name, depth, res);
            return;
        }
        _ => {}
    }
    if let Some(v) = v
        && !v.enum_values.is_empty()
    {
        enum_check(v, data, name, res);
    }
}

/// minItems, maxItems and uniqueItems (slice_validator.go).
pub(crate) fn array_errors(
    v: &crate::structural::ValueValidation,
    a: &[Value],
    name: &str,
    errs: &mut Vec<FieldError>,
) {
    if let Some(min) = v.min_items
        && (a.len() as i64) < min
    {
        errs.push(invalid(
            name,
            Value::from(a.len() as i64),
            body_msg(name, &format!("should have at least {min} items")),
        ));
    }
    if let Some(max) = v.max_items
        && (a.len() as i64) > max
    {
        errs.push(too_many(name, a.len(), max));
    }
    if v.unique_items && has_duplicates(a) {
        errs.push(invalid(
            name,
            Value::String(String::new()),
            body_msg(name, "shouldn't contain duplicates"),
        ));
    }
}

/// Whether the array passes minItems, maxItems and uniqueItems.
pub(crate) fn array_ok(v: &crate::structural::ValueValidation, a: &[Value]) -> bool {
    v.min_items.is_none_or(|min| (a.len() as i64) >= min)
        && v.max_items.is_none_or(|max| (a.len() as i64) <= max)
        && !(v.unique_items && has_duplicates(a))
}

/// Whether `data` is one of the enum values (true when there is no enum).
#[inline]
pub(crate) fn enum_ok(v: &crate::structural::ValueValidation, data: &Value) -> bool {
    v.enum_values.is_empty() || v.enum_values.iter().any(|e| json_equal(e, data))
}

fn enum_check(v: &crate::structural::ValueValidation, data: &Value, name: &str, res: &mut Res) {
    res.matches += 1;
    if !v.enum_values.iter().any(|e| json_equal(e, data)) {
        res.errs.push(enum_fail(name, data, &v.enum_values));
    }
}

pub(crate) fn enum_fail(name: &str, data: &Value, values: &[Value]) -> FieldError {
    let allowed: Vec<String> = values
        .iter()
        .map(|x| match x {
            Value::String(s) => s.clone(),
            other => serde_json::to_string(other).unwrap_or_default(),
        })
        .collect();
    let refs: Vec<&str> = allowed.iter().map(String::as_str).collect();
    let value = if data.is_null() {
        Value::String(String::new())
    } else {
        data.clone()
    };
    FieldError::not_supported(err_path(name), value, &refs)
}

/// Equality of decoded JSON as reflect.DeepEqual after numeric conversion: numbers compare by
/// value.
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            // Exact for integers beyond 2^53 (crate::exact).
            crate::exact::num_eq(x, y)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, p)| y.get(k).is_some_and(|q| json_equal(p, q)))
        }
        _ => a == b,
    }
}

fn has_duplicates(a: &[Value]) -> bool {
    let mut seen = std::collections::HashSet::with_capacity(a.len());
    a.iter()
        .any(|x| !seen.insert(serde_json::to_string(x).unwrap_or_default()))
}

/// maxLength fails (characters are counted only when the byte length does not decide:
/// chars <= bytes <= 4 chars).
#[inline]
fn max_length_fails(max: i64, st: &str) -> bool {
    st.len() as i64 > max && st.chars().count() as i64 > max
}

/// minLength fails (see [`max_length_fails`]).
#[inline]
fn min_length_fails(min: i64, st: &str) -> bool {
    let bytes = st.len() as i64;
    bytes < min || (bytes < min.saturating_mul(4) && (st.chars().count() as i64) < min)
}

/// The first failing string check (maxLength, minLength, pattern), as kube-openapi reports it.
pub(crate) fn string_checks(
    v: &crate::structural::ValueValidation,
    st: &str,
    name: &str,
) -> Option<FieldError> {
    if v.max_length.is_none() && v.min_length.is_none() && v.pattern.is_none() {
        return None;
    }
    if let Some(max) = v.max_length
        && max_length_fails(max, st)
    {
        let unit = if max == 1 { "byte" } else { "bytes" };
        return Some(FieldError::new(
            FieldErrorType::TooLong,
            err_path(name),
            Some(Value::String(st.to_string())),
            format!("may not be more than {max} {unit}"),
        ));
    }
    if let Some(min) = v.min_length
        && min_length_fails(min, st)
    {
        return Some(invalid(
            name,
            Value::String(st.to_string()),
            body_msg(name, &format!("should be at least {min} chars long")),
        ));
    }
    if let Some(p) = &v.pattern
        && !p.is_match(st)
    {
        return Some(invalid(
            name,
            Value::String(st.to_string()),
            body_msg(name, &format!("should match '{}'", p.source)),
        ));
    }
    None
}

/// Whether [`string_checks`] finds nothing.
#[inline]
pub(crate) fn string_ok(v: &crate::structural::ValueValidation, st: &str) -> bool {
    v.max_length.is_none_or(|max| !max_length_fails(max, st))
        && v.min_length.is_none_or(|min| !min_length_fails(min, st))
        && v.pattern.as_ref().is_none_or(|p| p.is_match(st))
}

/// multipleOf fails (a negative factor always does); exact for an integer value and an
/// integral factor (values.go `MultipleOfInt`), else the float rule.
#[inline]
fn multiple_of_fails(m: f64, n: Option<&serde_json::Number>, f: f64) -> bool {
    if let Some(ok) = n.and_then(|n| crate::exact::int_multiple_of(n, m)) {
        return !ok;
    }
    m < 0.0 || !is_json_integer(if m < 1.0 { 1.0 / m * f } else { f / m })
}

/// Ordering of the value and a bound: exact for integers (crate::exact), f64 otherwise.
#[inline]
fn cmp_bound(n: Option<&serde_json::Number>, f: f64, b: f64) -> Option<std::cmp::Ordering> {
    match n {
        Some(n) => crate::exact::cmp_f64(n, b),
        None => f.partial_cmp(&b),
    }
}

#[inline]
fn minimum_fails(
    v: &crate::structural::ValueValidation,
    min: f64,
    n: Option<&serde_json::Number>,
    f: f64,
) -> bool {
    use std::cmp::Ordering::*;
    match cmp_bound(n, f, min) {
        Some(Less) => true,
        Some(Equal) => v.exclusive_minimum,
        _ => false,
    }
}

#[inline]
fn maximum_fails(
    v: &crate::structural::ValueValidation,
    max: f64,
    n: Option<&serde_json::Number>,
    f: f64,
) -> bool {
    use std::cmp::Ordering::*;
    match cmp_bound(n, f, max) {
        Some(Greater) => true,
        Some(Equal) => v.exclusive_maximum,
        _ => false,
    }
}

fn number_of(data: &Value) -> Option<&serde_json::Number> {
    match data {
        Value::Number(n) => Some(n),
        _ => None,
    }
}

/// Whether [`number_checks`] finds nothing.
#[inline]
pub(crate) fn number_ok(v: &crate::structural::ValueValidation, data: &Value) -> bool {
    let f = as_f64(data);
    let n = number_of(data);
    v.multiple_of.is_none_or(|m| !multiple_of_fails(m, n, f))
        && v.minimum.is_none_or(|min| !minimum_fails(v, min, n, f))
        && v.maximum.is_none_or(|max| !maximum_fails(v, max, n, f))
}

pub(crate) fn number_checks(
    v: &crate::structural::ValueValidation,
    data: &Value,
    name: &str,
    errs: &mut Vec<FieldError>,
) {
    let f = as_f64(data);
    let n = number_of(data);
    // The bad value is the value as decoded (an integer stays exact).
    let fv = || data.clone();
    if let Some(m) = v.multiple_of
        && multiple_of_fails(m, n, f)
    {
        if m < 0.0 {
            errs.push(invalid(
                name,
                Value::from(m),
                format!(
                    "factor MultipleOf declared for {name} must be positive: {}",
                    go_float(m)
                ),
            ));
        } else {
            errs.push(invalid(
                name,
                fv(),
                body_msg(name, &format!("should be a multiple of {}", go_float(m))),
            ));
        }
    }
    if let Some(min) = v.minimum
        && minimum_fails(v, min, n, f)
    {
        let rel = if v.exclusive_minimum {
            "should be greater than"
        } else {
            "should be greater than or equal to"
        };
        errs.push(invalid(
            name,
            fv(),
            body_msg(name, &format!("{rel} {}", go_float(min))),
        ));
    }
    if let Some(max) = v.maximum
        && maximum_fails(v, max, n, f)
    {
        let rel = if v.exclusive_maximum {
            "should be less than"
        } else {
            "should be less than or equal to"
        };
        errs.push(invalid(
            name,
            fv(),
            body_msg(name, &format!("{rel} {}", go_float(max))),
        ));
    }
}

fn validate_junctors(
    v: &crate::structural::ValueValidation,
    data: &Value,
    name: &mut String,
    depth: usize,
    res: &mut Res,
) {
    if !v.any_of.is_empty() {
        let mut best: Option<Res> = None;
        let mut ok = false;
        for alt in &v.any_of {
            let r = validate_node(alt, data, name, depth + 1);
            if r.errs.is_empty() {
                ok = true;
                best = Some(r);
                break;
            }
            if best.as_ref().is_none_or(|b| r.matches > b.matches) {
                best = Some(r);
            }
        }
        if !ok {
            res.errs.push(composite(format!(
                "{} must validate at least one schema (anyOf)",
                go_quote(name)
            )));
        }
        if let Some(b) = best {
            res.merge(b);
        }
    }
    if !v.one_of.is_empty() {
        let mut best: Option<Res> = None;
        let mut first_ok: Option<Res> = None;
        let mut validated = 0;
        for alt in &v.one_of {
            let r = validate_node(alt, data, name, depth + 1);
            if r.errs.is_empty() {
                validated += 1;
                best = None;
                if first_ok.is_none() {
                    first_ok = Some(r);
                }
                continue;
            }
            if validated == 0 && best.as_ref().is_none_or(|b| r.matches > b.matches) {
                best = Some(r);
            }
        }
        if validated != 1 {
            let extra = if validated == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {validated} valid alternatives")
            };
            res.errs.push(composite(format!(
                "{} must validate one and only one schema (oneOf). {extra}",
                go_quote(name)
            )));
            if let Some(b) = best {
                res.merge(b);
            }
        } else if let Some(f) = first_ok {
            res.merge(f);
        }
    }
    if !v.all_of.is_empty() {
        let mut validated = 0;
        for alt in &v.all_of {
            let r = validate_node(alt, data, name, depth + 1);
            if r.errs.is_empty() {
                validated += 1;
            }
            res.merge(r);
        }
        if validated != v.all_of.len() {
            let extra = if validated == 0 {
                ". None validated"
            } else {
                ""
            };
            res.errs.push(composite(format!(
                "{} must validate all the schemas (allOf){extra}",
                go_quote(name)
            )));
        }
    }
    if let Some(not) = &v.not {
        let r = validate_node(not, data, name, depth + 1);
        if r.errs.is_empty() {
            res.errs.push(composite(format!(
                "{} must not validate the schema (not)",
                go_quote(name)
            )));
        }
    }
}

fn validate_object(
    s: &Schema,
    v: Option<&crate::structural::ValueValidation>,
    m: &Map<String, Value>,
    name: &mut String,
    depth: usize,
    res: &mut Res,
) {
    res.matches += 1;
    if let Some(v) = v
        && let Some(e) = object_count_error(v, m.len(), name)
    {
        res.errs.push(e);
        return;
    }
    let base = name.len();
    // additionalProperties
    match &s.additional {
        Some(Additional::Bool(false)) => {
            for k in m.keys() {
                if s.property(k).is_none() {
                    res.errs.push(forbidden(name, k));
                }
            }
        }
        Some(Additional::Schema(a)) => {
            for (k, x) in m {
                if s.property(k).is_none() {
                    name.push('.');
                    name.push_str(k);
                    let r = validate_node(a, x, name, depth + 1);
                    res.merge(r);
                    name.truncate(base);
                }
            }
        }
        _ => {}
    }
    if !s.properties.is_empty() {
        let mut cur = s.prop_cursor();
        for (k, x) in m {
            if let Some(ps) = cur.get(k) {
                if !name.is_empty() {
                    name.push('.');
                }
                name.push_str(k);
                let r = validate_node(ps, x, name, depth + 1);
                res.merge(r);
                name.truncate(base);
            }
        }
    }
    if let Some(v) = v {
        required_errors(v, m, name, &mut res.errs);
    }
}

/// minProperties / maxProperties (object_validator.go): on failure the object validator
/// stops before looking at the properties.
pub(crate) fn object_count_error(
    v: &crate::structural::ValueValidation,
    len: usize,
    name: &str,
) -> Option<FieldError> {
    let n = len as i64;
    if let Some(min) = v.min_properties
        && n < min
    {
        return Some(invalid(
            name,
            Value::from(n),
            body_msg(name, &format!("should have at least {min} properties")),
        ));
    }
    if let Some(max) = v.max_properties
        && n > max
    {
        return Some(too_many(name, len, max));
    }
    None
}

/// Whether [`object_count_error`] finds nothing.
#[inline]
pub(crate) fn object_count_ok(v: &crate::structural::ValueValidation, len: usize) -> bool {
    let n = len as i64;
    v.min_properties.is_none_or(|min| n >= min) && v.max_properties.is_none_or(|max| n <= max)
}

/// A key not allowed by `additionalProperties: false`.
pub(crate) fn forbidden(name: &str, k: &str) -> FieldError {
    invalid(
        name,
        Value::String(k.to_string()),
        format!("{name}.{k} in body is a forbidden property"),
    )
}

/// `required` (object_validator.go), in the order the schema lists them.
pub(crate) fn required_errors(
    v: &crate::structural::ValueValidation,
    m: &Map<String, Value>,
    name: &str,
    errs: &mut Vec<FieldError>,
) {
    for k in &v.required {
        if !m.contains_key(k.as_str()) {
            errs.push(FieldError::required(err_path(&format!("{name}.{k}")), ""));
        }
    }
}

/// Validates a whole object (or subtree) against the schema, the way upstream's
/// `ValidateCustomResource` does; `root` is the kube-openapi root path ("" for a whole
/// resource, "status" when validating only the status).
pub fn validate(schema: &Schema, obj: &Value, root: &str) -> Vec<FieldError> {
    let mut name = root.to_string();
    validate_node(schema, obj, &mut name, 0).errs
}

/// [`validate`] with a validator rooted at a subtree, as the status subresource runs it
/// (apiextensions-apiserver pkg/registry/customresource/validator.go `ValidateStatusUpdate`:
/// `ValidateCustomResourceUpdate(field.NewPath("status"), status, …, statusSchemaValidator)`,
/// the validator built from `properties[status]` alone). kube-openapi names fields relative to
/// that root, so messages read `addresses[0].value in body …`, while pkg/apiserver/validation
/// `ValidateCustomResource` puts each error at `fldPath.Child(name)`: `status.addresses[0].value`
/// (and at `status` itself for errors about the root).
pub fn validate_rooted(schema: &Schema, obj: &Value, field_root: &str) -> Vec<FieldError> {
    let mut errs = validate(schema, obj, "");
    for e in &mut errs {
        e.field = rebase_field(field_root, &e.field);
    }
    errs
}

/// `fldPath.Child(name)` for a kube-openapi error name (`<nil>` is the root itself).
fn rebase_field(root: &str, field: &str) -> String {
    if field.is_empty() || field == "<nil>" {
        root.to_string()
    } else {
        format!("{root}.{field}")
    }
}

/// Whether [`validate`] reports nothing for `obj` (whatever the root path): the same rules,
/// evaluated as a predicate that stops at the first failure and builds no error.
pub fn is_valid(schema: &Schema, obj: &Value) -> bool {
    is_valid_at(schema, obj, 0)
}

/// [`is_valid`] of `data` at recursion depth `depth` (`validate_node(..).errs.is_empty()`).
pub(crate) fn is_valid_at(s: &Schema, data: &Value, depth: usize) -> bool {
    if depth > 512 {
        return false;
    }
    let kind = kind_bit(data);
    if s.plan.quick & kind != 0 && kind & (K_ARRAY | K_OBJECT) == 0 {
        // A scalar or null whose own checks cannot fail (and it has no children).
        return true;
    }
    let typed = is_typed(s);
    if data.is_null() {
        return (!typed || s.nullable) && s.v.as_deref().is_none_or(|v| v.enum_values.is_empty());
    }
    if typed && !schema_type_matches(s, data) {
        return false;
    }
    if let Some(v) = s.v.as_deref() {
        if has_junctors(v) && !junctors_valid(v, data, depth) {
            return false;
        }
        let own = match data {
            Value::String(st) => string_ok(v, st),
            Value::Number(_) => number_ok(v, data),
            Value::Array(a) => array_ok(v, a),
            Value::Object(m) => {
                object_count_ok(v, m.len()) && v.required.iter().all(|k| m.contains_key(k))
            }
            _ => true,
        };
        if !own || !enum_ok(v, data) {
            return false;
        }
    }
    if let (Some(f), Value::String(st)) = (s.format, data)
        && !formats::check(f, st)
    {
        return false;
    }
    match data {
        Value::Array(a) => s
            .items
            .as_deref()
            .is_none_or(|items| a.iter().all(|x| is_valid_at(items, x, depth + 1))),
        Value::Object(m) => {
            let mut cur = s.prop_cursor();
            m.iter().all(|(k, x)| match cur.get(k) {
                Some(ps) => is_valid_at(ps, x, depth + 1),
                None => match &s.additional {
                    Some(Additional::Bool(false)) => false,
                    Some(Additional::Schema(a)) => is_valid_at(a, x, depth + 1),
                    _ => true,
                },
            })
        }
        _ => true,
    }
}

/// Whether allOf/anyOf/oneOf/not report nothing for `data` ([`junctor_errors`] is empty).
pub(crate) fn junctors_valid(
    v: &crate::structural::ValueValidation,
    data: &Value,
    depth: usize,
) -> bool {
    let ok = |alt: &Schema| is_valid_at(alt, data, depth + 1);
    (v.any_of.is_empty() || v.any_of.iter().any(ok))
        && (v.one_of.is_empty() || v.one_of.iter().filter(|a| ok(a)).count() == 1)
        && v.all_of.iter().all(ok)
        && v.not.as_deref().is_none_or(|n| !ok(n))
}

// ---------------------------------------------------------------------------------------
// x-kubernetes-list-type set/map uniqueness (pkg/apiserver/schema/listtype/validation.go)

/// Reports `Duplicate value` errors for list-type set and map lists. `path` is the field path
/// of `obj` ("" at the root).
pub fn validate_list_sets_and_maps(schema: &Schema, obj: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut p = path.to_string();
    list_walk(schema, obj, &mut p, &mut errs, 0);
    errs
}

fn child(p: &mut String, k: &str) -> usize {
    let l = p.len();
    if !p.is_empty() {
        p.push('.');
    }
    p.push_str(k);
    l
}

fn list_walk(s: &Schema, x: &Value, p: &mut String, errs: &mut Vec<FieldError>, depth: usize) {
    if depth > 512 || !s.has_set_or_map {
        return;
    }
    match x {
        Value::Array(a) => {
            match s.list_type {
                Some(ListType::Set) => {
                    let mut seen = std::collections::HashSet::with_capacity(a.len());
                    for (i, it) in a.iter().enumerate() {
                        if !seen.insert(canonical(it)) {
                            errs.push(FieldError::duplicate(format!("{p}[{i}]"), it.clone()));
                        }
                    }
                }
                Some(ListType::Map) => {
                    let mut seen = std::collections::HashSet::with_capacity(a.len());
                    for (i, it) in a.iter().enumerate() {
                        let Value::Object(m) = it else {
                            errs.push(FieldError::invalid(
                                format!("{p}[{i}]"),
                                it.clone(),
                                "must be an object for an x-kubernetes-list-type: map",
                            ));
                            continue;
                        };
                        let mut key = Map::new();
                        for k in &s.list_map_keys {
                            if let Some(kv) = m.get(k) {
                                key.insert(k.clone(), kv.clone());
                            } else if let Some(d) = s
                                .items
                                .as_deref()
                                .and_then(|it| it.property(k))
                                .and_then(|ks| ks.default.clone())
                            {
                                key.insert(k.clone(), d);
                            }
                        }
                        let key = Value::Object(key);
                        if !seen.insert(canonical(&key)) {
                            errs.push(FieldError::duplicate(format!("{p}[{i}]"), key));
                        }
                    }
                }
                _ => {}
            }
            if let Some(items) = s.items.as_deref() {
                for (i, it) in a.iter().enumerate() {
                    let l = p.len();
                    push_index(p, i);
                    list_walk(items, it, p, errs, depth + 1);
                    p.truncate(l);
                }
            }
        }
        Value::Object(m) => {
            for (k, v) in m {
                if let Some(ps) = s.property(k) {
                    let l = child(p, k);
                    list_walk(ps, v, p, errs, depth + 1);
                    p.truncate(l);
                } else if let Some(a) = s.additional_schema() {
                    let l = child(p, k);
                    list_walk(a, v, p, errs, depth + 1);
                    p.truncate(l);
                }
            }
        }
        _ => {}
    }
}

/// Canonical text of a JSON value (keys sorted, numbers normalised) for set membership.
fn canonical(v: &Value) -> String {
    match v {
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => go_float(n.as_f64().unwrap_or(0.0)),
        },
        _ => serde_json::to_string(v).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::structural::compile;
    use serde_json::json;

    fn msgs(schema: Value, obj: Value) -> Vec<String> {
        let s = compile(&schema).unwrap();
        validate(&s, &obj, "")
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn cron_tab_messages() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "cronSpec": {"type": "string", "pattern": "^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$"},
            "image": {"type": "string"},
            "replicas": {"type": "integer", "minimum": 1, "maximum": 10}}}}});
        assert_eq!(
            msgs(
                schema.clone(),
                json!({"spec": {"cronSpec": "* * * *", "replicas": 15}})
            ),
            vec![
                r#"spec.cronSpec: Invalid value: "* * * *": spec.cronSpec in body should match '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'"#,
                "spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10",
            ]
        );
        assert_eq!(
            msgs(schema, json!({"spec": {"replicas": "string"}})),
            vec![
                r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#
            ]
        );
    }
}
