//! Field sets of server-side apply: which fields of an object a field manager owns, and
//! their `fieldsV1` encoding in `metadata.managedFields`.
//!
//! Where it sits: under the apply patch mechanism and the managedFields tracking of every
//! write (both to come, issue 17); no IO. It follows structured-merge-diff's `fieldpath`
//! package: path elements and their total order (`element.go`, with `value.Compare` for
//! values and `FieldList.Compare` for keys), sets as members plus child sets (`set.go`),
//! and the `fieldsV1` encoding (`serialize.go`, `serialize-pe.go`): `f:<name>` for a field,
//! `k:<json>` for the item of a map-type list with those key fields, `v:<json>` for the
//! item of a set-type list, `i:<n>` for an index, `{}` for a member without children and
//! `"."` for a node that is a member and has children too.
//!
//! [`Set::to_json`] writes upstream's bytes (elements in upstream's order, `.` last,
//! Go's `encoding/json` escaping inside `k:` and `v:`). [`Set::to_value`] gives the same
//! content as a JSON value to store in an object; its keys then come out in
//! `serde_json::Map`'s string order (`.` first), which is also what kubectl prints in YAML.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::gofmt::{go_json, go_json_float, go_quote};

/// One step of a path into an object.
#[derive(Debug, Clone)]
pub enum PathElement {
    /// A field of a map or struct.
    Field(String),
    /// The item of a map-type list (`x-kubernetes-list-type: map`) with these key field
    /// values, sorted by name.
    Key(Vec<(String, Value)>),
    /// The item of a set-type list with this value.
    Value(Value),
    /// An item by its position.
    Index(usize),
}

impl PathElement {
    /// A key element from `(name, value)` pairs in any order.
    pub fn key(mut fields: Vec<(String, Value)>) -> PathElement {
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        PathElement::Key(fields)
    }

    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }

    /// The element as one key of a `fieldsV1` object (before JSON string escaping).
    pub fn to_fields_v1_key(&self) -> String {
        match self {
            PathElement::Field(n) => format!("f:{n}"),
            PathElement::Key(fields) => {
                let mut s = String::from("k:{");
                for (i, (name, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    s.push_str(&go_json(&Value::String(name.clone())));
                    s.push(':');
                    s.push_str(&go_json(v));
                }
                s.push('}');
                s
            }
            PathElement::Value(v) => format!("v:{}", go_json(v)),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses one key of a `fieldsV1` object; `Ok(None)` for an element type this version
    /// does not know (upstream drops those).
    pub fn from_fields_v1_key(s: &str) -> Result<Option<PathElement>, String> {
        let Some((kind, rest)) = s.split_at_checked(2) else {
            return Err("key must be 2 characters long:".into());
        };
        if !kind.ends_with(':') {
            return Err(format!("missing colon: {s}"));
        }
        Ok(Some(match &kind[..1] {
            "f" => PathElement::Field(rest.to_string()),
            "v" => PathElement::Value(serde_json::from_str(rest).map_err(|e| e.to_string())?),
            "k" => match serde_json::from_str(rest).map_err(|e| e.to_string())? {
                Value::Object(m) => PathElement::key(m.into_iter().collect()),
                Value::Null => PathElement::Key(Vec::new()),
                _ => return Err("expected object".into()),
            },
            "i" => PathElement::Index(rest.parse().map_err(|e| format!("{e}"))?),
            _ => return Ok(None),
        }))
    }
}

/// Upstream's `PathElement.String`: `.name`, `[key=value,…]`, `[=value]`, `[index]`.
impl std::fmt::Display for PathElement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathElement::Field(n) => write!(f, ".{n}"),
            PathElement::Key(fields) => {
                f.write_str("[")?;
                for (i, (name, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{name}={}", value_string(v))?;
                }
                f.write_str("]")
            }
            PathElement::Value(v) => write!(f, "[={}]", value_string(v)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// Upstream's `value.ToString`.
fn value_string(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
        Value::Number(n) => go_json_float(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => go_quote(s),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(value_string).collect::<Vec<_>>().join(",")
        ),
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| format!("{k}={}", value_string(v)))
            .collect(),
    }
}

/// A path as upstream prints it in conflict messages (`.spec.containers[name="nginx"].image`).
pub fn path_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Upstream's order: fields, then keys, then values, then indexes; within a kind by name,
/// by key fields (name, then value, shorter first), by value, by number.
impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Key(a), PathElement::Key(b)) => {
                for ((an, av), (bn, bv)) in a.iter().zip(b) {
                    let c = an.cmp(bn).then_with(|| compare_values(av, bv));
                    if c != Ordering::Equal {
                        return c;
                    }
                }
                a.len().cmp(&b.len())
            }
            (PathElement::Value(a), PathElement::Value(b)) => compare_values(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

/// Upstream's total order of values (`value.Compare`): numbers (integers and floats
/// compared numerically, a float first when equal in value but not in kind), then strings,
/// booleans, lists, maps, null.
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Number(n) if n.is_f64() => 0,
            Value::Number(_) => 1,
            Value::String(_) => 2,
            Value::Bool(_) => 3,
            Value::Array(_) => 4,
            Value::Object(_) => 5,
            Value::Null => 6,
        }
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if x.is_f64() || y.is_f64() {
                let (fx, fy) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
                return fx.partial_cmp(&fy).unwrap_or(Ordering::Equal);
            }
            match (x.as_i64(), y.as_i64()) {
                (Some(i), Some(j)) => i.cmp(&j),
                _ => x.as_u64().cmp(&y.as_u64()),
            }
        }
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (i, j) in x.iter().zip(y) {
                let c = compare_values(i, j);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            // Sorted keys, compared pairwise; then the shorter map first.
            for ((kx, vx), (ky, vy)) in x.iter().zip(y) {
                let c = kx.cmp(ky).then_with(|| compare_values(vx, vy));
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

/// A set of paths: the members at this level, and the sets below each element that has
/// children. A path is in the set when its last element is a member of the set its
/// other elements lead to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Set {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, Set>,
}

impl Set {
    /// The empty set.
    pub fn new() -> Set {
        Set::default()
    }

    /// Whether the set holds no path.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(Set::is_empty)
    }

    /// Adds `path` (the empty path adds nothing).
    pub fn insert(&mut self, path: &[PathElement]) {
        let Some((last, parents)) = path.split_last() else {
            return;
        };
        // Elements are cloned only where the set does not have them yet: most inserts of a
        // walk land below parents already there.
        let mut node = self;
        for pe in parents {
            if !node.children.contains_key(pe) {
                node.children.insert(pe.clone(), Set::default());
            }
            node = node.children.get_mut(pe).expect("inserted above");
        }
        if !node.members.contains(last) {
            node.members.insert(last.clone());
        }
    }

    /// Whether `path` is in the set.
    pub fn has(&self, path: &[PathElement]) -> bool {
        let Some((last, parents)) = path.split_last() else {
            return false;
        };
        let mut node = self;
        for pe in parents {
            match node.children.get(pe) {
                Some(c) => node = c,
                None => return false,
            }
        }
        node.members.contains(last)
    }

    /// The set below `pe` (empty if none).
    pub fn child(&self, pe: &PathElement) -> Option<&Set> {
        self.children.get(pe)
    }

    /// The paths in both sets or either.
    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, s) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(s),
                None => s.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    /// The paths of `self` that are not in `other`.
    pub fn difference(&self, other: &Set) -> Set {
        let mut out = Set {
            members: self.members.difference(&other.members).cloned().collect(),
            children: BTreeMap::new(),
        };
        for (pe, s) in &self.children {
            let rest = match other.children.get(pe) {
                Some(o) => s.difference(o),
                None => s.clone(),
            };
            if !rest.is_empty() {
                out.children.insert(pe.clone(), rest);
            }
        }
        out
    }

    /// The paths in both sets.
    pub fn intersection(&self, other: &Set) -> Set {
        let mut out = Set {
            members: self.members.intersection(&other.members).cloned().collect(),
            children: BTreeMap::new(),
        };
        for (pe, s) in &self.children {
            if let Some(o) = other.children.get(pe) {
                let both = s.intersection(o);
                if !both.is_empty() {
                    out.children.insert(pe.clone(), both);
                }
            }
        }
        out
    }

    /// Every path of the set, in upstream's order (structured-merge-diff `Set.Iterate`:
    /// at each level the members first, in element order, then the paths below each
    /// child, in element order).
    pub fn paths(&self) -> Vec<Vec<PathElement>> {
        let mut out = Vec::new();
        self.collect_paths(&mut Vec::new(), &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Vec<PathElement>>) {
        for m in &self.members {
            prefix.push(m.clone());
            out.push(prefix.clone());
            prefix.pop();
        }
        for (pe, s) in &self.children {
            prefix.push(pe.clone());
            s.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// The `fieldsV1` bytes upstream writes for this set.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{");
        self.emit(false, &mut out);
        out.push('}');
        out
    }

    fn emit(&self, include_self: bool, out: &mut String) {
        let start = out.len();
        let field = |out: &mut String, key: &str| {
            if out.len() > start {
                out.push(',');
            }
            out.push_str(&go_json(&Value::String(key.to_string())));
            out.push(':');
        };
        let mut members = self.members.iter().peekable();
        let mut children = self
            .children
            .iter()
            .filter(|(_, s)| !s.is_empty())
            .peekable();
        loop {
            let take_member = match (members.peek(), children.peek()) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(m), Some((c, _))) => *m < *c,
            };
            if take_member {
                let m = members.next().expect("peeked");
                field(out, &m.to_fields_v1_key());
                out.push_str("{}");
                continue;
            }
            let (c, s) = children.next().expect("peeked");
            let also_member = members.next_if(|m| *m == c).is_some();
            field(out, &c.to_fields_v1_key());
            out.push('{');
            s.emit(also_member, out);
            out.push('}');
        }
        if include_self && out.len() > start {
            field(out, ".");
            out.push_str("{}");
        }
    }

    /// The set as a JSON value for `managedFields[].fieldsV1`: what [`Set::to_json`]
    /// writes, built directly (every write encodes its managers' sets; printing and parsing
    /// them again cost a third of a create's field tracking).
    pub fn to_value(&self) -> Value {
        Value::Object(self.value_map(false))
    }

    fn value_map(&self, include_self: bool) -> serde_json::Map<String, Value> {
        let mut out = serde_json::Map::new();
        for m in &self.members {
            out.insert(m.to_fields_v1_key(), Value::Object(Default::default()));
        }
        for (c, s) in &self.children {
            if s.is_empty() {
                continue;
            }
            let also_member = self.members.contains(c);
            out.insert(
                c.to_fields_v1_key(),
                Value::Object(s.value_map(also_member)),
            );
        }
        if include_self && !out.is_empty() {
            out.insert(".".into(), Value::Object(Default::default()));
        }
        out
    }

    /// Reads a `fieldsV1` value. Keys of an element type this version does not know are
    /// dropped, as upstream drops them.
    pub fn from_value(v: &Value) -> Result<Set, String> {
        let (set, _) = Self::read(v)?;
        Ok(set.unwrap_or_default())
    }

    /// The set below one `fieldsV1` object and whether the object marks its own element a
    /// member (`"."`, or no children at all).
    fn read(v: &Value) -> Result<(Option<Set>, bool), String> {
        let map = match v {
            Value::Object(m) => m,
            Value::Null => return Ok((None, true)),
            _ => return Err("parsing JSON: expected object".into()),
        };
        let mut set: Option<Set> = None;
        let mut is_member = false;
        for (k, child) in map {
            if k == "." {
                is_member = true;
                continue;
            }
            let pe = match PathElement::from_fields_v1_key(k) {
                Ok(Some(pe)) => pe,
                Ok(None) => continue,
                Err(e) => return Err(format!("parsing key as path element: {e}")),
            };
            let (grandchildren, child_is_member) = Self::read(child)?;
            let s = set.get_or_insert_with(Set::default);
            if child_is_member {
                s.members.insert(pe.clone());
            }
            if let Some(g) = grandchildren {
                s.children.insert(pe, g);
            }
        }
        if set.is_none() {
            is_member = true;
        }
        Ok((set, is_member))
    }
}

/// The `k:` element of a map-type list item (upstream's `keyedAssociativeListItemToPathElement`).
pub(crate) fn list_item_key(item: &Value, keys: &[&str]) -> Result<PathElement, String> {
    let Value::Object(fields) = item else {
        return Err("associative list with keys may not have non-map elements".into());
    };
    let mut key = Vec::with_capacity(keys.len());
    for k in keys {
        match fields.get(*k) {
            Some(v @ (Value::String(_) | Value::Number(_) | Value::Bool(_))) => {
                key.push(((*k).to_string(), v.clone()))
            }
            Some(Value::Null) | None => {
                return Err(format!(
                    "associative list with keys has an element that omits key field {}",
                    go_quote(k)
                ));
            }
            Some(_) => {
                return Err(format!(
                    "associative list key field {} has a value that is not a scalar",
                    go_quote(k)
                ));
            }
        }
    }
    Ok(PathElement::key(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(n: &str) -> PathElement {
        PathElement::Field(n.into())
    }

    fn set(paths: &[&[PathElement]]) -> Set {
        let mut s = Set::new();
        for p in paths {
            s.insert(p);
        }
        s
    }

    /// A Deployment-like apply: the shapes of upstream's `serialize_test.go` cases (fields,
    /// a keyed list item with its fields, set values, a member that has children).
    #[test]
    fn fields_v1_bytes_and_round_trip() {
        let web = PathElement::key(vec![("name".into(), json!("web"))]);
        let port = PathElement::key(vec![
            ("protocol".into(), json!("TCP")),
            ("containerPort".into(), json!(80)),
        ]);
        let s = set(&[
            &[f("metadata"), f("labels"), f("app")],
            &[f("metadata"), f("labels")],
            &[f("spec"), f("replicas")],
            &[f("spec")],
            &[f("spec"), f("containers"), web.clone()],
            &[f("spec"), f("containers"), web.clone(), f("name")],
            &[f("spec"), f("containers"), web.clone(), f("image")],
            &[
                f("spec"),
                f("containers"),
                web.clone(),
                f("ports"),
                port.clone(),
            ],
            &[
                f("spec"),
                f("containers"),
                web.clone(),
                f("ports"),
                port.clone(),
                f("containerPort"),
            ],
            &[f("spec"), f("finalizers"), PathElement::Value(json!("a<b"))],
            &[f("spec"), f("args"), PathElement::Index(0)],
        ]);
        let want = concat!(
            r#"{"f:metadata":{"f:labels":{"f:app":{},".":{}}},"#,
            r#""f:spec":{"f:args":{"i:0":{}},"f:containers":{"k:{\"name\":\"web\"}":{"#,
            r#""f:image":{},"f:name":{},"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{"#,
            r#""f:containerPort":{},".":{}}},".":{}}},"#,
            r#""f:finalizers":{"v:\"a\\u003cb\"":{}},"f:replicas":{},".":{}}}"#
        );
        assert_eq!(s.to_json(), want);
        let back = Set::from_value(&serde_json::from_str(want).unwrap()).unwrap();
        assert_eq!(back, s);
        assert_eq!(Set::from_value(&s.to_value()).unwrap(), s);
        assert_eq!(s.to_value(), serde_json::from_str::<Value>(want).unwrap());
    }

    /// A set written in upstream's canonical order (every element kind, nested, members
    /// with children) reads and writes back byte for byte — the property of upstream's
    /// `TestSerializeV1GoldenData`, on data of our own.
    #[test]
    fn canonical_fields_v1_round_trips_byte_for_byte() {
        let canonical = concat!(
            r#"{"f:a":{"f:b":{},"k:{\"name\":\"x\"}":{"v:2":{"f:c":{}}},"v:7":{},"v:false":{}},"#,
            r#""f:b":{"f:a":{},"f:z":{"k:{\"port\":80,\"protocol\":\"TCP\"}":{"k:{\"port\":80,\"protocol\":\"UDP\"}":{}}},".":{}},"#,
            r#""k:{\"name\":\"a\"}":{"i:0":{"i:1":{}}},"#,
            r#""k:{\"port\":9,\"protocol\":\"TCP\"}":{},"k:{\"port\":10,\"protocol\":\"TCP\"}":{},"#,
            r#""v:1.5":{},"v:2":{"f:q":{},".":{}},"v:\"aa\"":{},"v:\"ab\"":{"i:3":{}},"v:true":{},"#,
            r#""i:1":{},"i:2":{"f:x":{}},"i:10":{}}"#
        );
        let s = Set::from_value(&serde_json::from_str(canonical).unwrap()).unwrap();
        assert_eq!(s.to_json(), canonical);
        // Written from a JSON value whose keys come in another order, too.
        assert_eq!(Set::from_value(&s.to_value()).unwrap().to_json(), canonical);
        // The value built directly is the value of the bytes.
        assert_eq!(
            s.to_value(),
            serde_json::from_str::<Value>(&s.to_json()).unwrap()
        );
    }

    #[test]
    fn element_order_is_upstreams() {
        // Fields < keys < values < indexes; numbers numerically, ints and floats mixed.
        let mut v = vec![
            PathElement::Index(2),
            PathElement::Value(json!("b")),
            PathElement::Value(json!(10)),
            PathElement::Value(json!(9)),
            PathElement::Value(json!(9.5)),
            PathElement::key(vec![("port".into(), json!(10))]),
            PathElement::key(vec![("port".into(), json!(9))]),
            PathElement::key(vec![("a".into(), json!(1)), ("port".into(), json!(1))]),
            f("b"),
            f("a"),
        ];
        v.sort();
        let shown: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                ".a",
                ".b",
                "[a=1,port=1]",
                "[port=9]",
                "[port=10]",
                "[=9]",
                "[=9.5]",
                "[=10]",
                "[=\"b\"]",
                "[2]"
            ]
        );
    }

    #[test]
    fn conflict_paths_print_as_upstream() {
        let p = [
            f("spec"),
            f("containers"),
            PathElement::key(vec![("name".into(), json!("nginx"))]),
            f("image"),
        ];
        assert_eq!(path_string(&p), r#".spec.containers[name="nginx"].image"#);
        assert_eq!(path_string(&[f("spec"), f("replicas")]), ".spec.replicas");
    }

    #[test]
    fn set_algebra() {
        let a = set(&[&[f("spec"), f("a")], &[f("spec"), f("b")], &[f("x")]]);
        let b = set(&[&[f("spec"), f("b")], &[f("spec"), f("c")], &[f("spec")]]);
        assert_eq!(
            a.union(&b),
            set(&[
                &[f("spec"), f("a")],
                &[f("spec"), f("b")],
                &[f("spec"), f("c")],
                &[f("spec")],
                &[f("x")]
            ])
        );
        assert_eq!(a.difference(&b), set(&[&[f("spec"), f("a")], &[f("x")]]));
        assert_eq!(a.intersection(&b), set(&[&[f("spec"), f("b")]]));
        assert!(a.difference(&a).is_empty());
        assert!(a.has(&[f("spec"), f("a")]) && !a.has(&[f("spec")]));
        let paths: Vec<String> = b.paths().iter().map(|p| path_string(p)).collect();
        assert_eq!(paths, [".spec", ".spec.b", ".spec.c"]);
        // Members before children at each level, whatever their element order.
        let c = set(&[&[f("a"), f("z")], &[f("b")], &[f("a"), f("y"), f("q")]]);
        let paths: Vec<String> = c.paths().iter().map(|p| path_string(p)).collect();
        assert_eq!(paths, [".b", ".a.z", ".a.y.q"]);
    }

    #[test]
    fn reading_fields_v1() {
        // Unknown element kinds are dropped; a leaf without "." is a member; "." marks a
        // member with children.
        let v = json!({"f:a": {}, "z:new": {}, "f:b": {".": {}, "f:c": {}}, "f:d": {"f:e": {}}});
        let s = Set::from_value(&v).unwrap();
        assert_eq!(
            s,
            set(&[&[f("a")], &[f("b")], &[f("b"), f("c")], &[f("d"), f("e")]])
        );
        for bad in [
            json!({"f": {}}),
            json!({"fx": {}}),
            json!({"i:x": {}}),
            json!({"k:[1]": {}}),
            json!({"v:{": {}}),
            json!([]),
        ] {
            assert!(Set::from_value(&bad).is_err(), "{bad}");
        }
        assert_eq!(Set::from_value(&json!({})).unwrap(), Set::new());
    }
}
