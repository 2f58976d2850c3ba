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
//! * a child is pruned, null-pruned and defaulted before its own checks, and a missing
//!   defaulted property is inserted in key order, where the merge walk over the sorted
//!   object keys and sorted schema properties finds it;
//! * validation during the walk only decides *whether* the final object is valid: each
//!   node's own checks run after its children, first as the precompiled
//!   [`crate::structural::Plan`] (`quick`: the kinds a node cannot reject), then, if that does
//!   not decide, as exact predicates ([`crate::validate::is_valid`]'s rules). The first
//!   failure stops checking. Only then, for an invalid object, does
//!   [`crate::validate::validate`] run over the final object for upstream's exact errors in
//!   upstream's order — so the error list is the separate validation pass's by construction;
//! * field paths are not built while walking: each frame holds a `Path` link to its
//!   parent, and a path string is built only when a field is pruned.
//!
//! `serde_json` built with `preserve_order` would iterate keys in insertion order; the merge
//! walk needs sorted keys, so in that build the separate passes run instead.

use crate::default;
use crate::prune::is_object_meta_field;
use crate::structural::{Additional, K_ARRAY, K_OBJECT, KeyWords, Schema, kind_bit};
use crate::validate as val;
use crdplane_core::FieldError;
use serde_json::{Map, Value};
use std::sync::OnceLock;

/// Depth beyond which the walk stops deciding validity itself and leaves it to the
/// validator (which reports an internal error beyond depth 512). Schemas are at most 64
/// levels deep and the walk follows the schema, so this is a safety margin, not a limit
/// real objects reach.
const MAX_CHECK_DEPTH: usize = 256;

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
        check: validate,
        drops: Vec::new(),
    };
    w.value(obj, schema, true, &Path::Root, 0);
    // An invalid object (or one the walk could not decide): upstream's errors, exactly.
    let errors = if validate && !w.check {
        val::validate(schema, obj, "")
    } else {
        Vec::new()
    };
    Outcome {
        pruned: w.pruned,
        errors,
    }
}

/// The location of a node, as a link to its parent's location (built into a string only on
/// demand).
#[derive(Clone, Copy)]
enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl Path<'_> {
    fn write(&self, out: &mut String) {
        match *self {
            Path::Root => {}
            Path::Key(p, k) => {
                p.write(out);
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Path::Index(p, i) => {
                p.write(out);
                val::push_index(out, i);
            }
        }
    }

    /// The field path pruning reports (`spec.a[0].b`).
    fn field(&self) -> String {
        let mut s = String::new();
        self.write(&mut s);
        s
    }
}

struct Walker {
    pruned: Vec<String>,
    /// Validation is wanted and nothing has failed so far. Cleared at the first failure (or
    /// when the walk cannot decide): from then on the walk only prunes and defaults.
    check: bool,
    /// Keys to remove from the objects being walked (a stack shared by all levels).
    drops: Vec<String>,
}

impl Walker {
    /// Prunes, null-prunes, defaults and checks `x` under `s` (pruning and defaulting as
    /// `prune_value(x, Some(s), root)` followed by the null and default passes).
    fn value(&mut self, x: &mut Value, s: &Schema, root: bool, path: &Path<'_>, depth: usize) {
        match x {
            Value::Object(_) => self.object(x, s, root, path, depth),
            Value::Array(_) => self.array(x, s, path, depth),
            _ => self.leaf(x, s, depth),
        }
    }

    /// Checks a scalar or null (nothing to prune).
    #[inline(always)]
    fn leaf(&mut self, x: &Value, s: &Schema, depth: usize) {
        if self.check && !scalar_passes(s, x, kind_bit(x), depth) {
            self.check = false;
        }
    }

    /// Checks a value that is final already (kept apiVersion/kind/metadata...).
    fn check_final(&mut self, x: &Value, s: &Schema, depth: usize) {
        if self.check && !val::is_valid_at(s, x, depth) {
            self.check = false;
        }
    }

    /// The value defaulting puts in place of a missing or non-nullable null field of schema
    /// `p` (which has a default), checked.
    fn filled_default(&mut self, p: &Schema, depth: usize) -> Value {
        if let Some(d) = &p.plan.default {
            if !p.plan.default_ok {
                self.check = false;
            }
            return d.clone();
        }
        let mut v = p.default.clone().unwrap_or(Value::Null);
        default::apply_defaults(&mut v, p);
        self.check_final(&v, p, depth);
        v
    }

    /// An object: its entries, missing defaulted properties, then its own checks.
    fn object(&mut self, x: &mut Value, s: &Schema, root: bool, path: &Path<'_>, depth: usize) {
        let Value::Object(m) = x else { return };
        if depth > MAX_CHECK_DEPTH {
            self.check = false;
        }
        let mut present = if root || s.embedded {
            self.entries::<true>(m, s, root, path, depth)
        } else {
            self.entries::<false>(m, s, false, path, depth)
        };
        if !s.plan.defaulted.is_empty() {
            self.fill_missing(m, s, &mut present, depth);
        }
        if self.check && s.plan.quick & K_OBJECT == 0 {
            let ok = match s.plan.required_only {
                Some(mask) => present & mask == mask,
                None => object_own_ok(s, x, present, depth),
            };
            if !ok {
                self.check = false;
            }
        }
    }

    /// The entries of an object (`EMBEDDED`: a resource root or embedded resource, whose
    /// apiVersion/kind/metadata are special). Returns the bit set of declared properties (by
    /// index, the first 64) present afterwards.
    #[inline(always)]
    fn entries<const EMBEDDED: bool>(
        &mut self,
        m: &mut Map<String, Value>,
        s: &Schema,
        root: bool,
        path: &Path<'_>,
        depth: usize,
    ) -> u64 {
        let keys = &s.prop_keys[..];
        let drops_start = self.drops.len();
        let mut present = 0u64;
        let mut j = 0usize;
        // Resource roots whose apiVersion/kind/metadata have no schema (the common case):
        // those keys, when typed as TypeMeta/ObjectMeta, are kept as they are (metadata
        // losing its unknown keys), which is what `meta` does for them.
        let plain_meta = EMBEDDED && s.additional.is_none() && !s.preserve_unknown;
        for (k, v) in m.iter_mut() {
            let kb = k.as_bytes();
            // The merge walk over sorted keys and sorted properties: `j` is the first
            // property not yet passed; properties passed over are absent. Usually the key is
            // property `j` (equal first bytes, and equal `KeyWords`, exact for keys of up to
            // 16 bytes) or sorts before it (a smaller first byte); anything else is
            // `merge_step`'s full comparison.
            let mut hit = usize::MAX;
            if let Some(pw) = keys.get(j) {
                let k0 = kb.first().copied().unwrap_or(0);
                let p0 = pw.first0();
                if p0 == k0 && kb.len() <= 16 && *pw == KeyWords::of(kb) {
                    hit = j;
                    j += 1;
                } else if p0 <= k0 {
                    hit = merge_step(s, &mut j, kb);
                }
            }
            let keep = 'keep: {
                if plain_meta && hit == usize::MAX {
                    match (k.as_str(), &mut *v) {
                        ("apiVersion" | "kind", Value::String(_)) => break 'keep true,
                        ("metadata", Value::Object(meta)) => {
                            self.coerce_meta(meta, path);
                            break 'keep true;
                        }
                        _ => {}
                    }
                }
                if EMBEDDED
                    && is_meta_field(k)
                    && let Some(keep) = self.meta(k, v, s, hit, path, depth)
                {
                    keep
                } else if let Some((_, p)) = s.properties.get(hit) {
                    self.child(k, v, p, path, depth + 1)
                } else if let Some(Additional::Schema(a)) = &s.additional {
                    self.child(k, v, a, path, depth + 1)
                } else {
                    self.unspecified(k, v, s, root, path)
                }
            };
            if !keep {
                self.drops.push(k.clone());
            } else if hit < 64 {
                present |= 1 << hit;
            }
        }
        if self.drops.len() > drops_start {
            for k in self.drops.drain(drops_start..) {
                m.remove(&k);
            }
        }
        present
    }

    /// Missing properties with a default get it (defaulted inside).
    #[inline(never)]
    fn fill_missing(
        &mut self,
        m: &mut Map<String, Value>,
        s: &Schema,
        present: &mut u64,
        depth: usize,
    ) {
        for &i in &s.plan.defaulted {
            let missing = if i < 64 {
                *present & (1 << i) == 0
            } else {
                !m.contains_key(s.properties[i].0.as_str())
            };
            if missing {
                let v = self.filled_default(&s.properties[i].1, depth + 1);
                m.insert(s.properties[i].0.clone(), v);
                if i < 64 {
                    *present |= 1 << i;
                }
            }
        }
    }

    /// A key with a schema (declared, or under `additionalProperties`); returns whether it
    /// stays.
    #[inline(always)]
    fn child(
        &mut self,
        k: &str,
        v: &mut Value,
        sub: &Schema,
        path: &Path<'_>,
        depth: usize,
    ) -> bool {
        let kind = match v {
            Value::Object(_) => {
                self.object(v, sub, false, &Path::Key(path, k), depth);
                return true;
            }
            Value::Array(_) => {
                self.array(v, sub, &Path::Key(path, k), depth);
                return true;
            }
            Value::Null => return self.null_field(v, sub, depth),
            _ => kind_bit(v),
        };
        if self.check && !scalar_passes(sub, v, kind, depth) {
            self.check = false;
        }
        true
    }

    /// A `null` field: kept if nullable, else replaced by the default (defaulted inside),
    /// else dropped. Returns whether it stays.
    #[inline(never)]
    fn null_field(&mut self, v: &mut Value, sub: &Schema, depth: usize) -> bool {
        if sub.nullable {
            self.leaf(v, sub, depth);
            true
        } else if sub.default.is_some() {
            *v = self.filled_default(sub, depth);
            true
        } else {
            false
        }
    }

    /// A key no schema describes; returns whether it stays.
    #[inline(never)]
    fn unspecified(
        &mut self,
        k: &str,
        v: &mut Value,
        s: &Schema,
        root: bool,
        path: &Path<'_>,
    ) -> bool {
        let forbidden = matches!(s.additional, Some(Additional::Bool(false)));
        if s.preserve_unknown {
            // Unspecified fields are kept as they are.
        } else if s.additional.is_some() {
            // additionalProperties: true/false keeps the key but prunes below it.
            self.untyped(v, &Path::Key(path, k));
        } else {
            // Upstream does not report apiVersion/kind/metadata dropped at the root.
            if !(root && is_meta_field(k)) {
                self.pruned.push(Path::Key(path, k).field());
            }
            return false;
        }
        if forbidden {
            self.check = false;
        }
        true
    }

    /// apiVersion/kind/metadata of a resource (the root or an embedded resource): kept
    /// without pruning (any type under x-kubernetes-preserve-unknown-fields); ObjectMeta
    /// loses its unknown keys. `Some(keep)` when `k` is one of them.
    #[inline(never)]
    fn meta(
        &mut self,
        k: &str,
        v: &mut Value,
        s: &Schema,
        hit: usize,
        path: &Path<'_>,
        depth: usize,
    ) -> Option<bool> {
        let sub = match s.properties.get(hit) {
            Some((_, p)) => Some(p),
            None => s.additional_schema(),
        };
        let meta = if s.preserve_unknown {
            is_meta_field(k)
        } else {
            match k {
                "apiVersion" | "kind" => v.is_string(),
                "metadata" => v.is_object(),
                _ => false,
            }
        };
        if !meta {
            return None;
        }
        if k == "metadata"
            && let Value::Object(m) = v
        {
            self.coerce_meta(m, path);
        }
        if let Some(sub) = sub {
            if v.is_null() {
                if !sub.nullable {
                    if sub.default.is_none() {
                        return Some(false);
                    }
                    *v = self.filled_default(sub, depth + 1);
                }
            } else {
                default::prune_non_nullable_nulls(v, sub);
                default::apply_defaults(v, sub);
            }
            self.check_final(v, sub, depth + 1);
        } else if matches!(s.additional, Some(Additional::Bool(false))) {
            self.check = false;
        }
        Some(true)
    }

    /// An array: its items, then its own checks.
    fn array(&mut self, x: &mut Value, s: &Schema, path: &Path<'_>, depth: usize) {
        let Value::Array(a) = x else { return };
        if depth > MAX_CHECK_DEPTH {
            self.check = false;
        }
        match s.items.as_deref() {
            None => {
                if !s.preserve_unknown {
                    for (i, v) in a.iter_mut().enumerate() {
                        if matches!(v, Value::Object(_) | Value::Array(_)) {
                            self.untyped(v, &Path::Index(path, i));
                        }
                    }
                }
            }
            Some(items) => {
                for (i, v) in a.iter_mut().enumerate() {
                    match v {
                        Value::Object(_) => {
                            self.object(v, items, false, &Path::Index(path, i), depth + 1)
                        }
                        Value::Array(_) => self.array(v, items, &Path::Index(path, i), depth + 1),
                        Value::Null if !items.nullable && items.default.is_some() => {
                            *v = self.filled_default(items, depth + 1);
                        }
                        _ => self.leaf(v, items, depth + 1),
                    }
                }
            }
        }
        if self.check && s.plan.quick & K_ARRAY == 0 && !array_own_ok(s, x, depth) {
            self.check = false;
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

    /// Drops ObjectMeta keys that metav1.ObjectMeta does not have (see `prune::coerce_meta`);
    /// `path` is the location of the resource whose `metadata` this is.
    #[inline(always)]
    fn coerce_meta(&mut self, meta: &mut Map<String, Value>, path: &Path<'_>) {
        if !meta.keys().all(|k| is_object_meta_field(k)) {
            self.drop_unknown_meta(meta, path);
        }
    }

    #[inline(never)]
    fn drop_unknown_meta(&mut self, meta: &mut Map<String, Value>, path: &Path<'_>) {
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
}

/// The merge walk's general step (see `Walker::entries`): advances `j` past the properties
/// that sort before key `kb` and returns the index of the property equal to it, if any
/// (`usize::MAX` if none).
#[inline(never)]
fn merge_step(s: &Schema, j: &mut usize, kb: &[u8]) -> usize {
    while let Some((p, _)) = s.properties.get(*j) {
        match p.as_bytes().cmp(kb) {
            std::cmp::Ordering::Less => *j += 1,
            std::cmp::Ordering::Equal => {
                *j += 1;
                return *j - 1;
            }
            std::cmp::Ordering::Greater => break,
        }
    }
    usize::MAX
}

fn is_meta_field(k: &str) -> bool {
    matches!(k, "apiVersion" | "kind" | "metadata")
}

/// Whether a scalar or null (of kind `kind`) passes its checks at `s`: by the plan
/// ([`crate::structural::Plan::quick`], then the range rules), else by [`scalar_ok`].
#[inline(always)]
fn scalar_passes(s: &Schema, x: &Value, kind: u8, depth: usize) -> bool {
    let plan = &s.plan;
    if plan.quick & kind != 0 {
        return true;
    }
    if plan.ranged & kind != 0 {
        match x {
            Value::String(st) => {
                let (lo, hi) = plan.str_bytes;
                if (lo..=hi).contains(&st.len())
                    && (!plan.str_pattern
                        || (s.v.as_deref())
                            .and_then(|v| v.pattern.as_ref())
                            .is_some_and(|p| p.is_match(st)))
                {
                    return true;
                }
            }
            Value::Number(n) => {
                // Exact for integers beyond 2^53 (crate::exact).
                let ge = crate::exact::cmp_f64(n, plan.num.0).is_some_and(|o| o.is_ge());
                let le = crate::exact::cmp_f64(n, plan.num.1).is_some_and(|o| o.is_le());
                if ge && le {
                    return true;
                }
            }
            _ => {}
        }
    }
    scalar_ok(s, x, kind, depth)
}

/// Whether a scalar (not null) passes its checks at `s`, when [`crate::structural::Plan::quick`]
/// did not decide (`kind`: its [`kind_bit`]).
#[inline(never)]
fn scalar_ok(s: &Schema, x: &Value, kind: u8, depth: usize) -> bool {
    if s.plan.types & kind == 0 || s.plan.junctors {
        // A null, a type mismatch, a float under an integer type, or allOf/anyOf/oneOf/not.
        return val::is_valid_at(s, x, depth);
    }
    if let (Some(f), Value::String(st)) = (s.format, x)
        && !crate::formats::check(f, st)
    {
        return false;
    }
    let Some(v) = s.v.as_deref() else {
        return true;
    };
    let own = match x {
        Value::String(st) => val::string_ok(v, st),
        Value::Number(_) => val::number_ok(v, x),
        _ => true,
    };
    own && val::enum_ok(v, x)
}

/// Whether an object's own checks pass after its children were walked: type,
/// allOf/anyOf/oneOf/not, enum, min/maxProperties and required (`present`: the declared
/// properties the walk saw or inserted).
#[inline(never)]
fn object_own_ok(s: &Schema, x: &Value, present: u64, depth: usize) -> bool {
    let Value::Object(m) = x else { return false };
    if val::is_typed(s) && !val::schema_type_matches(s, x) {
        return false;
    }
    let Some(v) = s.v.as_deref() else {
        return true;
    };
    (!val::has_junctors(v) || val::junctors_valid(v, x, depth))
        && val::enum_ok(v, x)
        && val::object_count_ok(v, m.len())
        && required_ok(v, s, m, present)
}

/// Whether an array's own checks pass after its items were walked: type,
/// allOf/anyOf/oneOf/not, min/maxItems, uniqueItems and enum.
#[inline(never)]
fn array_own_ok(s: &Schema, x: &Value, depth: usize) -> bool {
    let Value::Array(a) = x else { return false };
    if val::is_typed(s) && !val::schema_type_matches(s, x) {
        return false;
    }
    let Some(v) = s.v.as_deref() else {
        return true;
    };
    (!val::has_junctors(v) || val::junctors_valid(v, x, depth))
        && val::array_ok(v, a)
        && val::enum_ok(v, x)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::structural::compile;
    use serde_json::json;

    /// Upstream's separate passes: (object, pruned, errors).
    fn separate(s: &Schema, obj: &Value) -> (Value, Vec<String>, Vec<String>) {
        let mut o = obj.clone();
        let pruned = crate::prune::prune(&mut o, s);
        default::prune_non_nullable_nulls(&mut o, s);
        default::apply_defaults(&mut o, s);
        let errs = val::validate(s, &o, "")
            .iter()
            .map(|e| e.to_string())
            .collect();
        (o, pruned, errs)
    }

    fn fused(s: &Schema, obj: &Value) -> (Value, Vec<String>, Vec<String>) {
        let mut o = obj.clone();
        let out = prune_default_validate(&mut o, s);
        let errs = out.errors.iter().map(|e| e.to_string()).collect();
        (o, out.pruned, errs)
    }

    /// The merge walk on keys that share first bytes, prefixes (up to and past the 16 bytes
    /// `KeyWords` cover) and lengths with the declared properties, the empty key and NUL
    /// bytes, keys between and after the properties: every subset of the keys at even and
    /// at odd positions of the list, then pseudo-random subsets of all of them, each object
    /// checked against the separate passes.
    #[test]
    fn merge_walk_matches_separate_passes_on_awkward_keys() {
        let long = "abcdefghijklmnopqrstu"; // 21 bytes
        let props = [
            "",
            "\0",
            "a",
            "ab",
            "abcd",
            "abcdefgh",
            "abcdefghijklmnop",
            long,
            "b",
            "metadata",
        ];
        let mut properties = Map::new();
        for (i, p) in props.iter().enumerate() {
            properties.insert(
                p.to_string(),
                json!({"type": "integer", "maximum": 100 + i, "default": i}),
            );
        }
        let schema = json!({"type": "object", "properties": {"spec": {
            "type": "object", "properties": properties}}});
        let s = compile(&schema).unwrap();
        let keys = [
            "",
            "\0",
            "\0\0",
            "a",
            "aa",
            "ab",
            "abc",
            "abcd",
            "abce",
            "abcdefgh",
            "abcdefgX",
            "abcdefghijklmnop",
            "abcdefghijklmnoq",
            "abcdefghijklmnopqrstu",
            "abcdefghijklmnopqrstv",
            "abcdefghijklmnopqrst",
            // Equal to the 21-byte property in the first and last 8 bytes only.
            "abcdefghijklnnopqrstu",
            "abcdefghXjklmnopqrstu",
            "b",
            "c",
            "metadata",
            "zz",
        ];
        let check = |mask: u64| {
            let spec: Map<String, Value> = (keys.iter().enumerate())
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(i, k)| (k.to_string(), json!(i * 7)))
                .collect();
            let obj = json!({"apiVersion": "v1", "kind": "K", "spec": spec});
            assert_eq!(fused(&s, &obj), separate(&s, &obj), "{obj}");
        };
        // Every subset of the keys at even and at odd positions, then pseudo-random subsets
        // of all of them.
        let (even, odd) = (0x15_5555u64, 0x2a_aaaau64);
        for m in 0u64..(1 << 11) {
            let spread = |base: u64| {
                let mut out = 0;
                let mut bits = m;
                for i in 0..22 {
                    if base & (1 << i) != 0 {
                        out |= (bits & 1) << i;
                        bits >>= 1;
                    }
                }
                out
            };
            check(spread(even));
            check(spread(odd));
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..4096 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            check(x & 0x3f_ffff);
        }
        // One object with every key: all declared ones kept (some out of range), the rest
        // pruned, missing defaults filled.
        let all: Map<String, Value> = keys.iter().map(|k| (k.to_string(), json!(150))).collect();
        let obj = json!({"spec": all});
        let (o, pruned, errs) = fused(&s, &obj);
        assert_eq!(
            (o.clone(), pruned.clone(), errs.clone()),
            separate(&s, &obj)
        );
        assert_eq!(o["spec"].as_object().unwrap().len(), props.len());
        assert_eq!(pruned.len(), keys.len() - props.len());
        assert_eq!(errs.len(), props.len());
    }

    /// The root's TypeMeta/ObjectMeta shortcut: metadata loses its unknown keys (reported),
    /// keeps ObjectMeta's; mistyped apiVersion/kind/metadata take the general path.
    #[test]
    fn root_type_and_object_meta() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
        let s = compile(&schema).unwrap();
        for obj in [
            json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "x", "bogus": 1,
                "labels": {"a": "b"}, "zz": null}, "spec": {}}),
            json!({"apiVersion": 1, "kind": ["K"], "metadata": "x"}),
            json!({"apiVersion": "v1", "kind": "K", "metadata": {}, "other": 1}),
        ] {
            assert_eq!(fused(&s, &obj), separate(&s, &obj), "{obj}");
        }
        let (o, pruned, _) = fused(
            &s,
            &json!({"apiVersion": "v1", "metadata": {"name": "x", "bogus": 1}}),
        );
        assert_eq!(o, json!({"apiVersion": "v1", "metadata": {"name": "x"}}));
        assert_eq!(pruned, vec!["metadata.bogus"]);
    }
}
