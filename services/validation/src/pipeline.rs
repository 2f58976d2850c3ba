//! The CR write path's schema passes in one walk: pruning ([`crate::prune`]), null pruning and
//! defaulting ([`crate::default`]) and schema validation ([`crate::validate`]) of a whole
//! resource, as [`crate::admit`] runs them on every create/update (and, without validation,
//! as `Normalize` runs them on reads).
//!
//! The result is defined as — and tested to equal — upstream's separate passes in upstream's
//! order (k8s.io/apiextensions-apiserver: pruning/algorithm.go, defaulting/prunenulls.go,
//! defaulting/algorithm.go, then validation.go's kube-openapi validator): pruned paths in
//! traversal order, the same object, the same field errors in the same order. One walk is
//! enough because every pass is a function of the subtree below a node and its schema:
//!
//! * a child is pruned, null-pruned and defaulted before its own validation, and a missing
//!   defaulted property is inserted (and validated) in key order, where the merge walk over
//!   the sorted object keys and sorted schema properties finds it;
//! * a node's own checks (type, allOf/anyOf/oneOf/not, enum, min/maxProperties, required,
//!   min/maxItems...) run after its children; the errors kube-openapi reports before the
//!   children's are spliced in front of them (only ever done when there is an error);
//! * field paths are not built while walking: each frame holds a [`Path`] link to its
//!   parent, and a path string is built only when a field is pruned or an error reported;
//! * every node-level check first runs as a cheap predicate; only when it fails does the
//!   exact error text come from the same functions [`crate::validate`] uses.
//!
//! `serde_json` built with `preserve_order` would iterate keys in insertion order; the merge
//! walk needs sorted keys, so in that build the separate passes run instead.

use crate::default;
use crate::prune::is_object_meta_field;
use crate::structural::{Additional, Schema, key_prefix};
use crate::validate as val;
use crdplane_core::FieldError;
use serde_json::{Map, Value};
use std::cmp::Ordering;
use std::sync::OnceLock;

/// kube-openapi's validator stops descending at this depth (an internal error is reported).
const MAX_VALIDATION_DEPTH: usize = 512;

/// Result of [`prune_default_validate`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// The pruned (unknown) field paths in traversal order, as [`crate::prune::prune`].
    pub pruned: Vec<String>,
    /// The schema validation errors of the pruned and defaulted object, as
    /// [`crate::validate::validate`] reports them for the whole resource.
    pub errors: Vec<FieldError>,
}

/// Prunes, null-prunes and defaults `obj` (a whole custom resource) in place and validates the
/// result against `schema`. Equals [`crate::prune::prune`], then
/// [`crate::default::prune_non_nullable_nulls`], [`crate::default::apply_defaults`] and
/// [`crate::validate::validate`]`(schema, obj, "")`.
pub fn prune_default_validate(obj: &mut Value, schema: &Schema) -> Outcome {
    run(obj, schema, true)
}

/// The same without validation: the read path's normalisation and the status subresource's
/// write path. Returns the pruned field paths.
pub fn prune_and_default(obj: &mut Value, schema: &Schema) -> Vec<String> {
    run(obj, schema, false).pruned
}

/// Whether this build's `serde_json::Map` iterates its keys in sorted order.
fn map_is_sorted() -> bool {
    static SORTED: OnceLock<bool> = OnceLock::new();
    *SORTED.get_or_init(|| {
        let mut m = Map::new();
        m.insert("b".to_string(), Value::Null);
        m.insert("a".to_string(), Value::Null);
        m.keys().next().map(String::as_str) == Some("a")
    })
}

fn run(obj: &mut Value, schema: &Schema, validate: bool) -> Outcome {
    if !map_is_sorted() {
        let pruned = crate::prune::prune(obj, schema);
        default::prune_non_nullable_nulls(obj, schema);
        default::apply_defaults(obj, schema);
        let errors = if validate {
            val::validate(schema, obj, "")
        } else {
            Vec::new()
        };
        return Outcome { pruned, errors };
    }
    let mut w = Walker {
        pruned: Vec::new(),
        errs: Vec::new(),
        validate,
        drops: Vec::new(),
        pending: Vec::new(),
        side: Vec::new(),
    };
    w.node(obj, schema, true, &Path::Root, 0);
    Outcome {
        pruned: w.pruned,
        errors: w.errs,
    }
}

/// The location of a node, as a link to its parent's location (built into a string only on
/// demand).
#[derive(Clone, Copy)]
enum Path<'a> {
    Root,
    /// A declared property.
    Key(&'a Path<'a>, &'a str),
    /// A key under `additionalProperties` (kube-openapi joins it with a "." even at the root).
    AddKey(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl Path<'_> {
    fn write(&self, out: &mut String, validator: bool) {
        match *self {
            Path::Root => {}
            Path::Key(p, k) => {
                p.write(out, validator);
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Path::AddKey(p, k) => {
                p.write(out, validator);
                if validator || !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Path::Index(p, i) => {
                p.write(out, validator);
                val::push_index(out, i);
            }
        }
    }

    /// The kube-openapi validator's name for this location (see `validate::validate`).
    fn name(&self) -> String {
        let mut s = String::new();
        self.write(&mut s, true);
        s
    }

    /// The field path pruning reports (`spec.a[0].b`).
    fn field(&self) -> String {
        let mut s = String::new();
        self.write(&mut s, false);
        s
    }
}

struct Walker {
    pruned: Vec<String>,
    errs: Vec<FieldError>,
    validate: bool,
    /// Keys to remove from the objects being walked (a stack shared by all levels).
    drops: Vec<String>,
    /// Defaulted missing properties to insert: (property index, value).
    pending: Vec<(usize, Value)>,
    /// Property errors held back while a node with both properties and
    /// additionalProperties reports its additionalProperties errors first.
    side: Vec<FieldError>,
}

/// How one child of an object is reported by the validator.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stream {
    /// A declared property; with `true` its errors are held back (see [`Walker::side`]).
    Prop(bool),
    Additional,
}

impl Walker {
    /// Prunes, null-prunes, defaults and validates `x` under `s` (pruning and defaulting as
    /// `prune_value(x, Some(s), root)` followed by the null and default passes).
    fn node(&mut self, x: &mut Value, s: &Schema, root: bool, path: &Path<'_>, depth: usize) {
        if self.validate && depth > MAX_VALIDATION_DEPTH {
            self.errs.push(FieldError::internal(
                val::err_path(&path.name()),
                "object nesting is too deep",
            ));
            self.validate = false;
            self.node(x, s, root, path, depth);
            self.validate = true;
            return;
        }
        match x {
            Value::Object(m) => {
                let start = self.errs.len();
                let present = self.entries(m, s, root, path, depth);
                if self.validate {
                    self.object_checks(x, s, path, depth, start, present);
                }
            }
            Value::Array(a) => {
                let start = self.errs.len();
                self.items(a, s, path, depth);
                if self.validate {
                    self.array_checks(x, s, path, depth, start);
                }
            }
            _ => {
                if self.validate {
                    self.leaf(x, s, path, depth);
                }
            }
        }
    }

    /// Validates a scalar or null (nothing to prune).
    #[inline]
    fn leaf(&mut self, x: &Value, s: &Schema, path: &Path<'_>, depth: usize) {
        if !leaf_ok(s, x) {
            self.exact(x, s, path, depth);
        }
    }

    /// The validator's exact errors for `x` (the slow path: builds the name).
    #[cold]
    #[inline(never)]
    fn exact(&mut self, x: &Value, s: &Schema, path: &Path<'_>, depth: usize) {
        let mut name = path.name();
        self.errs.extend(val::validate_at(s, x, &mut name, depth));
    }

    /// Validates a value that is final already (a default, kept ObjectMeta...).
    fn validate_only(&mut self, x: &Value, s: &Schema, path: &Path<'_>, depth: usize) {
        if !self.validate {
            return;
        }
        match x {
            _ if depth > MAX_VALIDATION_DEPTH => self.exact(x, s, path, depth),
            Value::Object(_) | Value::Array(_) => self.exact(x, s, path, depth),
            _ => self.leaf(x, s, path, depth),
        }
    }

    /// Runs `f` for a child in `stream`, holding back its errors if needed.
    #[inline]
    fn in_stream(&mut self, stream: Stream, f: impl FnOnce(&mut Self)) {
        if stream == Stream::Prop(true) && self.validate {
            let before = self.errs.len();
            f(self);
            self.side.extend(self.errs.drain(before..));
        } else {
            f(self);
        }
    }

    /// The children of an object: returns the bit set of declared properties (by index, the
    /// first 64) present afterwards.
    fn entries(
        &mut self,
        m: &mut Map<String, Value>,
        s: &Schema,
        root: bool,
        path: &Path<'_>,
        depth: usize,
    ) -> u64 {
        let embedded = root || s.embedded;
        let props = &s.properties;
        let mixed = self.validate && !props.is_empty() && s.additional.is_some();
        let drops_start = self.drops.len();
        let pending_start = self.pending.len();
        let side_start = self.side.len();
        let mut present = 0u64;
        let mut j = 0usize;
        for (k, v) in m.iter_mut() {
            let kb = k.as_bytes();
            let mut prop_idx = None;
            if j < props.len() {
                let kp = key_prefix(kb);
                while j < props.len() {
                    match s.cmp_prop(j, kb, kp) {
                        Ordering::Less => {
                            self.missing(s, j, path, depth, mixed, &mut present);
                            j += 1;
                        }
                        Ordering::Equal => {
                            prop_idx = Some(j);
                            j += 1;
                            break;
                        }
                        Ordering::Greater => break,
                    }
                }
            }
            let keep = self.entry(k, v, prop_idx, s, embedded, root, path, depth, mixed);
            if !keep {
                self.drops.push(k.clone());
            } else if let Some(i) = prop_idx
                && i < 64
            {
                present |= 1 << i;
            }
        }
        while j < props.len() {
            self.missing(s, j, path, depth, mixed, &mut present);
            j += 1;
        }
        if self.drops.len() > drops_start {
            for k in self.drops.drain(drops_start..) {
                m.remove(&k);
            }
        }
        if self.pending.len() > pending_start {
            for (i, v) in self.pending.drain(pending_start..) {
                m.insert(props[i].0.clone(), v);
            }
        }
        if self.side.len() > side_start {
            self.errs.extend(self.side.drain(side_start..));
        }
        present
    }

    /// Property `j` is absent: with a default, the default (defaulted inside) is validated
    /// here, in key order, and inserted after the walk over the object.
    fn missing(
        &mut self,
        s: &Schema,
        j: usize,
        path: &Path<'_>,
        depth: usize,
        mixed: bool,
        present: &mut u64,
    ) {
        let (k, p) = &s.properties[j];
        let Some(d) = &p.default else { return };
        let mut v = d.clone();
        default::apply_defaults(&mut v, p);
        self.in_stream(Stream::Prop(mixed), |w| {
            w.validate_only(&v, p, &Path::Key(path, k), depth + 1)
        });
        self.pending.push((j, v));
        if j < 64 {
            *present |= 1 << j;
        }
    }

    /// One key of an object; returns whether it stays.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn entry(
        &mut self,
        k: &str,
        v: &mut Value,
        prop_idx: Option<usize>,
        s: &Schema,
        embedded: bool,
        root: bool,
        path: &Path<'_>,
        depth: usize,
        mixed: bool,
    ) -> bool {
        let prop = prop_idx.map(|i| &s.properties[i].1);
        let add_schema = s.additional_schema();
        // The schema the null/default passes and the validator use for this key.
        let sub = prop.or(add_schema);
        let (stream, cp) = match prop {
            Some(_) => (Stream::Prop(mixed), Path::Key(path, k)),
            None => (Stream::Additional, Path::AddKey(path, k)),
        };
        let forbidden = prop.is_none() && matches!(s.additional, Some(Additional::Bool(false)));
        let cd = depth + 1;
        if embedded {
            // apiVersion/kind/metadata of a resource are kept without pruning (any type under
            // x-kubernetes-preserve-unknown-fields); ObjectMeta loses its unknown keys.
            let meta = if s.preserve_unknown {
                is_meta_field(k)
            } else {
                match k {
                    "apiVersion" | "kind" => v.is_string(),
                    "metadata" => v.is_object(),
                    _ => false,
                }
            };
            if meta {
                if k == "metadata" {
                    self.coerce_meta(v, path);
                }
                if let Some(sub) = sub {
                    if v.is_null() {
                        if !null_keep(v, sub) {
                            return false;
                        }
                    } else {
                        default::prune_non_nullable_nulls(v, sub);
                        default::apply_defaults(v, sub);
                    }
                    self.in_stream(stream, |w| w.validate_only(v, sub, &cp, cd));
                } else if forbidden {
                    self.forbid(path, k);
                }
                return true;
            }
        }
        if let Some(sub) = sub {
            match v {
                Value::Null => {
                    if !null_keep(v, sub) {
                        return false;
                    }
                    self.in_stream(stream, |w| w.validate_only(v, sub, &cp, cd));
                }
                // Scalars: nothing to prune or default, only the (usually passing) checks.
                Value::Bool(_) | Value::Number(_) | Value::String(_)
                    if cd <= MAX_VALIDATION_DEPTH =>
                {
                    if self.validate && !leaf_ok(sub, v) {
                        self.in_stream(stream, |w| w.exact(v, sub, &cp, cd));
                    }
                }
                _ => self.in_stream(stream, |w| w.node(v, sub, false, &cp, cd)),
            }
            return true;
        }
        if s.preserve_unknown {
            // Unspecified fields are kept as they are.
            if forbidden {
                self.forbid(path, k);
            }
            return true;
        }
        if s.additional.is_some() {
            // additionalProperties: true/false keeps the key but prunes below it.
            self.untyped(v, &cp);
            if forbidden {
                self.forbid(path, k);
            }
            return true;
        }
        // Upstream does not report apiVersion/kind/metadata dropped at the root.
        if !(root && is_meta_field(k)) {
            self.pruned.push(cp.field());
        }
        false
    }

    fn forbid(&mut self, path: &Path<'_>, k: &str) {
        if self.validate {
            self.errs.push(val::forbidden(&path.name(), k));
        }
    }

    /// The items of an array.
    fn items(&mut self, a: &mut [Value], s: &Schema, path: &Path<'_>, depth: usize) {
        let Some(items) = s.items.as_deref() else {
            if !s.preserve_unknown {
                for (i, v) in a.iter_mut().enumerate() {
                    self.untyped(v, &Path::Index(path, i));
                }
            }
            return;
        };
        for (i, v) in a.iter_mut().enumerate() {
            let cp = Path::Index(path, i);
            if v.is_null() {
                if !items.nullable
                    && let Some(d) = &items.default
                {
                    *v = d.clone();
                    default::apply_defaults(v, items);
                }
                self.validate_only(v, items, &cp, depth + 1);
            } else if matches!(v, Value::Object(_) | Value::Array(_)) {
                self.node(v, items, false, &cp, depth + 1);
            } else if self.validate && depth < MAX_VALIDATION_DEPTH && !leaf_ok(items, v) {
                self.exact(v, items, &cp, depth + 1);
            } else if depth >= MAX_VALIDATION_DEPTH {
                self.node(v, items, false, &cp, depth + 1);
            }
        }
    }

    /// Prunes a value no schema describes: every object below is emptied.
    fn untyped(&mut self, x: &mut Value, path: &Path<'_>) {
        match x {
            Value::Object(m) => {
                for k in m.keys() {
                    self.pruned.push(Path::Key(path, k).field());
                }
                m.clear();
            }
            Value::Array(a) => {
                for (i, v) in a.iter_mut().enumerate() {
                    self.untyped(v, &Path::Index(path, i));
                }
            }
            _ => {}
        }
    }

    /// Drops ObjectMeta keys that metav1.ObjectMeta does not have (see `prune::coerce_meta`).
    fn coerce_meta(&mut self, v: &mut Value, path: &Path<'_>) {
        let Value::Object(meta) = v else { return };
        if meta.keys().all(|k| is_object_meta_field(k)) {
            return;
        }
        let mp = Path::Key(path, "metadata");
        let pruned = &mut self.pruned;
        meta.retain(|k, _| {
            if is_object_meta_field(k) {
                true
            } else {
                pruned.push(Path::Key(&mp, k).field());
                false
            }
        });
    }

    /// An object's own checks, after its children: type, allOf/anyOf/oneOf/not and enum
    /// (reported before the children's errors, which start at `start`), min/maxProperties
    /// (which replace the children's errors) and required.
    fn object_checks(
        &mut self,
        x: &Value,
        s: &Schema,
        path: &Path<'_>,
        depth: usize,
        start: usize,
        present: u64,
    ) {
        let Value::Object(m) = x else { return };
        let typed = val::is_typed(s);
        let ok = (!typed || val::schema_type_matches(s, x))
            && s.v.as_deref().is_none_or(|v| {
                !val::has_junctors(v)
                    && val::enum_ok(v, x)
                    && ((v.min_properties.is_none() && v.max_properties.is_none())
                        || val::object_count_error(v, m.len(), "").is_none())
                    && required_ok(v, s, m, present)
            });
        if ok {
            return;
        }
        let mut name = path.name();
        let mut pre = Vec::new();
        if typed && let Some(e) = val::type_error(s, x, &name) {
            pre.push(e);
        }
        if let Some(v) = s.v.as_deref() {
            if val::has_junctors(v) {
                pre.extend(val::junctor_errors(v, x, &mut name, depth));
            }
            if !val::enum_ok(v, x) {
                pre.push(val::enum_fail(&name, x, &v.enum_values));
            }
            if let Some(e) = val::object_count_error(v, m.len(), &name) {
                self.errs.truncate(start);
                self.errs.extend(pre);
                self.errs.push(e);
                return;
            }
        }
        if !pre.is_empty() {
            self.errs.splice(start..start, pre);
        }
        if let Some(v) = s.v.as_deref() {
            val::required_errors(v, m, &name, &mut self.errs);
        }
    }

    /// An array's own checks, after its items: type and allOf/anyOf/oneOf/not before the
    /// items' errors, then min/maxItems, uniqueItems and enum.
    fn array_checks(&mut self, x: &Value, s: &Schema, path: &Path<'_>, depth: usize, start: usize) {
        let Value::Array(a) = x else { return };
        let typed = val::is_typed(s);
        let ok = (!typed || val::schema_type_matches(s, x))
            && s.v
                .as_deref()
                .is_none_or(|v| !val::has_junctors(v) && val::array_ok(v, a) && val::enum_ok(v, x));
        if ok {
            return;
        }
        let mut name = path.name();
        let mut pre = Vec::new();
        if typed && let Some(e) = val::type_error(s, x, &name) {
            pre.push(e);
        }
        if let Some(v) = s.v.as_deref()
            && val::has_junctors(v)
        {
            pre.extend(val::junctor_errors(v, x, &mut name, depth));
        }
        if !pre.is_empty() {
            self.errs.splice(start..start, pre);
        }
        if let Some(v) = s.v.as_deref() {
            val::array_errors(v, a, &name, &mut self.errs);
            if !val::enum_ok(v, x) {
                self.errs.push(val::enum_fail(&name, x, &v.enum_values));
            }
        }
    }
}

fn is_meta_field(k: &str) -> bool {
    matches!(k, "apiVersion" | "kind" | "metadata")
}

/// A `null` under a known schema: kept if nullable, else replaced by the default (defaulted
/// inside), else dropped. Returns whether to keep it.
fn null_keep(v: &mut Value, sub: &Schema) -> bool {
    if sub.nullable {
        return true;
    }
    match &sub.default {
        Some(d) => {
            *v = d.clone();
            default::apply_defaults(v, sub);
            true
        }
        None => false,
    }
}

/// Whether every `required` key is present (`present`: declared properties seen by the walk).
fn required_ok(
    v: &crate::structural::ValueValidation,
    s: &Schema,
    m: &Map<String, Value>,
    present: u64,
) -> bool {
    if v.required.is_empty() {
        return true;
    }
    if let Some(mask) = v.required_mask {
        return present & mask == mask;
    }
    let bits = s.properties.len() <= 64;
    v.required
        .iter()
        .enumerate()
        .all(|(i, k)| match v.required_prop.get(i) {
            Some(&j) if bits && j < 64 => present & (1 << j) != 0,
            _ => m.contains_key(k.as_str()),
        })
}

/// Whether validating a scalar or null against `s` reports nothing (a fast, allocation-free
/// check; `false` sends the value to the exact validator, which may still find nothing).
#[inline(always)]
fn leaf_ok(s: &Schema, x: &Value) -> bool {
    let typed = val::is_typed(s);
    if x.is_null() {
        return (!typed || s.nullable) && s.v.as_deref().is_none_or(|v| v.enum_values.is_empty());
    }
    if typed && !val::schema_type_matches(s, x) {
        return false;
    }
    if let (Some(f), Value::String(st)) = (s.format, x)
        && !crate::formats::check(f, st)
    {
        return false;
    }
    let Some(v) = s.v.as_deref() else {
        return true;
    };
    if val::has_junctors(v) {
        return false;
    }
    let checks_ok = match x {
        Value::String(st) => val::string_checks(v, st, "").is_none(),
        Value::Number(_) => {
            let mut errs = Vec::new();
            val::number_checks(v, x, "", &mut errs);
            errs.is_empty()
        }
        _ => true,
    };
    checks_ok && val::enum_ok(v, x)
}
