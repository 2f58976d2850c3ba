//! `metadata.managedFields`: who owns which fields of an object, updated by every write,
//! and server-side apply's merge with its conflicts.
//!
//! Where it sits: the pure core of the apiserver's field manager (issue 17), over
//! [`crate::fieldpath`] (sets and their `fieldsV1` encoding) and [`crate::structured`] (the
//! schema-driven merge, comparison and removal); the write handlers call [`update`] on
//! create, update and patch and [`apply`] on `application/apply-patch+yaml`. It follows
//! structured-merge-diff's `merge/update.go` (`Update`, `Apply`, the pruning of fields an
//! applier stopped applying, conflicts with the other managers of changed fields) and the
//! apiserver's `util/managedfields/internal`: the manager identity (manager, operation,
//! subresource, and the API version of an Update, never the time), the entries' order,
//! the fields no manager ever owns (`stripmeta.go`), and the conflict texts (`conflict.go`).
//!
//! Single API version: every CRD version crdplane serves has the same schema shape (no
//! conversion webhooks), so a manager's set from another version is read as is.

use serde_json::{Map, Value, json};

use crate::fieldpath::{PathElement, Set, path_string};
use crate::gofmt::go_quote;
use crate::structured::{compare, field_set, merge, remove};

/// What a manager last did: apply, or any other write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Create, update, patch.
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `manager`.
    pub manager: String,
    /// `operation`.
    pub operation: Operation,
    /// `apiVersion` of the object the manager wrote.
    pub api_version: String,
    /// `time`, RFC 3339 (`None`: not recorded).
    pub time: Option<String>,
    /// `subresource` (`""`: the main resource).
    pub subresource: String,
    /// `fieldsV1`.
    pub fields: Set,
}

impl Entry {
    /// Whether `self` and `other` are the same manager (upstream's manager identifier: the
    /// name, operation and subresource; for an Update also the API version).
    pub(crate) fn same_manager(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == Operation::Apply || self.api_version == other.api_version)
    }

    /// upstream's manager identifier (`BuildManagerIdentifier`): the entry without its
    /// fields, fieldsType and time (and, for an applier, its API version), as JSON in
    /// ManagedFieldsEntry's field order with `omitempty` — what conflict messages sort
    /// managers by.
    fn identifier(&self) -> String {
        let q = |s: &str| crate::gofmt::go_json(&Value::String(s.to_string()));
        let mut parts = Vec::new();
        if !self.manager.is_empty() {
            parts.push(format!("\"manager\":{}", q(&self.manager)));
        }
        parts.push(format!("\"operation\":{}", q(self.operation.as_str())));
        if self.operation == Operation::Update && !self.api_version.is_empty() {
            parts.push(format!("\"apiVersion\":{}", q(&self.api_version)));
        }
        if !self.subresource.is_empty() {
            parts.push(format!("\"subresource\":{}", q(&self.subresource)));
        }
        format!("{{{}}}", parts.join(","))
    }

    /// How upstream names the manager in a conflict (`printManager`).
    fn printed(&self) -> String {
        let mut s = go_quote(&self.manager);
        if !self.subresource.is_empty() {
            s = format!("{s} with subresource {}", go_quote(&self.subresource));
        }
        if self.operation == Operation::Update {
            s = format!("{s} using {}", self.api_version);
        }
        s
    }
}

/// Reads `metadata.managedFields` (absent or null: none). Like upstream it refuses an
/// operation other than Apply and Update, a `fieldsType` other than `FieldsV1`, and
/// `fieldsV1` it cannot read.
pub fn decode(managed: Option<&Value>) -> Result<Vec<Entry>, String> {
    let items = match managed {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => return Err("expected a list of managed fields entries".into()),
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let s = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("");
        let operation = match s("operation") {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            other => return Err(format!("unsupported operation type: {other}")),
        };
        match s("fieldsType") {
            "FieldsV1" => {}
            other => return Err(format!("invalid fieldsType \"{other}\"")),
        }
        let fields = Set::from_value(item.get("fieldsV1").unwrap_or(&Value::Null))?;
        out.push(Entry {
            manager: s("manager").to_string(),
            operation,
            api_version: s("apiVersion").to_string(),
            time: item.get("time").and_then(Value::as_str).map(String::from),
            subresource: s("subresource").to_string(),
            fields,
        });
    }
    Ok(out)
}

/// `managedFields` as upstream writes it: Apply entries before Update entries, then by
/// time, manager, API version and subresource.
pub fn encode(entries: &[Entry]) -> Value {
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    sorted.sort_by(|p, q| {
        p.operation
            .cmp(&q.operation)
            .then_with(|| p.time.cmp(&q.time))
            .then_with(|| p.manager.cmp(&q.manager))
            .then_with(|| p.api_version.cmp(&q.api_version))
            .then_with(|| p.subresource.cmp(&q.subresource))
    });
    Value::Array(
        sorted
            .into_iter()
            .map(|e| entry_value(e, e.fields.to_value()))
            .collect(),
    )
}

/// One encoded entry, its `fieldsV1` given (`e.fields` unread).
fn entry_value(e: &Entry, fields_v1: Value) -> Value {
    // ManagedFieldsEntry's fields are `omitempty`.
    let mut m = Map::new();
    if !e.manager.is_empty() {
        m.insert("manager".into(), json!(e.manager));
    }
    m.insert("operation".into(), json!(e.operation.as_str()));
    if !e.api_version.is_empty() {
        m.insert("apiVersion".into(), json!(e.api_version));
    }
    if let Some(t) = &e.time {
        m.insert("time".into(), json!(t));
    }
    m.insert("fieldsType".into(), json!("FieldsV1"));
    m.insert("fieldsV1".into(), fields_v1);
    if !e.subresource.is_empty() {
        m.insert("subresource".into(), json!(e.subresource));
    }
    Value::Object(m)
}

/// The encoded managedFields of a create that carried none: `writer` (operation Update)
/// owns every field of `new` but those no manager owns — what
/// `encode(&update(&[], &{}, new, schema, writer))` gives, built in one walk of the object
/// ([`crate::structured::added_fields_v1`]). `None` when the writer owns nothing.
pub fn created(
    new: &Value,
    schema: Option<&Value>,
    writer: &Entry,
) -> Result<Option<Value>, String> {
    let mut fields = crate::structured::added_fields_v1(new, schema)?;
    // stripped(): type, identity and server-set metadata.
    fields.remove("f:apiVersion");
    fields.remove("f:kind");
    if let Some(Value::Object(meta)) = fields.get_mut("f:metadata") {
        meta.remove(".");
        for m in STRIPPED_METADATA {
            meta.remove(&format!("f:{m}"));
        }
    }
    if fields
        .get("f:metadata")
        .is_some_and(|m| m.as_object().is_some_and(Map::is_empty))
    {
        fields.remove("f:metadata");
    }
    if fields.is_empty() {
        return Ok(None);
    }
    Ok(Some(Value::Array(vec![entry_value(
        writer,
        Value::Object(fields),
    )])))
}

/// The fields no manager owns (upstream's `stripmeta.go`): type and identity, server-set
/// metadata, and managedFields itself.
fn stripped() -> &'static Set {
    static STRIPPED: std::sync::OnceLock<Set> = std::sync::OnceLock::new();
    STRIPPED.get_or_init(stripped_set)
}

/// The metadata fields of [`stripped`].
const STRIPPED_METADATA: [&str; 9] = [
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "clusterName",
    "generation",
    "managedFields",
    "resourceVersion",
];

fn stripped_set() -> Set {
    let f = |n: &str| PathElement::Field(n.into());
    let mut s = Set::new();
    s.insert(&[f("apiVersion")]);
    s.insert(&[f("kind")]);
    s.insert(&[f("metadata")]);
    for m in STRIPPED_METADATA {
        s.insert(&[f("metadata"), f(m)]);
    }
    s
}

/// `schema` (an object's structural schema) with `metadata` typed as upstream types
/// ObjectMeta for field management: labels and annotations granular maps of strings,
/// finalizers a set, ownerReferences a list keyed by `uid`, managedFields atomic, the rest
/// scalars. (A CRD's schema says at most `type: object` of metadata.)
pub fn with_object_meta(schema: &Value) -> Value {
    let string = json!({"type": "string"});
    let meta = json!({"type": "object", "properties": {
        "name": string, "generateName": string, "namespace": string, "uid": string,
        "resourceVersion": string, "selfLink": string, "creationTimestamp": string,
        "deletionTimestamp": string, "generation": {"type": "integer"},
        "deletionGracePeriodSeconds": {"type": "integer"},
        "labels": {"type": "object", "additionalProperties": string},
        "annotations": {"type": "object", "additionalProperties": string},
        "finalizers": {"type": "array", "x-kubernetes-list-type": "set", "items": string},
        "ownerReferences": {"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["uid"], "items": {"type": "object", "properties": {
                "apiVersion": string, "kind": string, "name": string, "uid": string,
                "controller": {"type": "boolean"}, "blockOwnerDeletion": {"type": "boolean"}}}},
        "managedFields": {"type": "array", "x-kubernetes-list-type": "atomic",
            "items": {"type": "object"}}
    }});
    let mut out = schema.clone();
    if let Value::Object(root) = &mut out {
        let props = root
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(p) = props {
            p.insert("metadata".into(), meta);
        }
    }
    out
}

/// One manager's fields that an apply would change against their will.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The manager as upstream prints it (`"kubectl-client-side-apply" using v1`).
    pub manager: String,
    /// The manager's identifier (`{"manager":"m","operation":"Apply"}`), by which a
    /// message of several managers orders them.
    pub key: String,
    /// The field (`.spec.replicas`).
    pub field: String,
}

/// Conflicts of an apply, in upstream's order and with its texts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflicts(pub Vec<Conflict>);

impl Conflicts {
    /// The Status message (`Apply failed with 1 conflict: conflict with "m": .spec.x`).
    pub fn message(&self) -> String {
        if let [c] = self.0.as_slice() {
            return format!(
                "Apply failed with 1 conflict: conflict with {}: {}",
                c.manager, c.field
            );
        }
        // upstream sorts the managers' identifiers (`sort.Strings(uniqueManagers)`).
        let mut managers: Vec<(&str, &str)> = self
            .0
            .iter()
            .map(|c| (c.key.as_str(), c.manager.as_str()))
            .collect();
        managers.sort();
        managers.dedup();
        let mut lines = Vec::new();
        for (key, printed) in managers {
            lines.push(format!("conflicts with {printed}:"));
            for c in self.0.iter().filter(|c| c.key == key) {
                lines.push(format!("- {}", c.field));
            }
        }
        format!(
            "Apply failed with {} conflicts: {}",
            self.0.len(),
            lines.join("\n")
        )
    }

    /// The Status causes: `FieldManagerConflict`, one per field.
    pub fn causes(&self) -> Vec<(String, String)> {
        self.0
            .iter()
            .map(|c| (format!("conflict with {}", c.manager), c.field.clone()))
            .collect()
    }
}

/// What went wrong in an apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyError {
    /// Other managers own fields the apply changes (409 Conflict unless forced).
    Conflicts(Conflicts),
    /// The applied configuration cannot be merged (e.g. a keyed list item without its
    /// key): upstream's 500 "failed to merge config" or the validation error it becomes.
    Invalid(String),
}

/// `entries` after a write by `writer` (operation Update; its `fields` ignored) that took
/// the object from `live` (`{}` for a create) to `new`: the writer owns what it added or
/// changed, other managers lose what changed or went, and empty entries go.
///
/// `writer.time` is the time of this write: the writer's entry takes it when the write
/// added or changed a field, and keeps its previous time otherwise (upstream's
/// `managedFieldsUpdater`: a write that changes nothing moves no timestamp).
pub fn update(
    entries: &[Entry],
    live: &Value,
    new: &Value,
    schema: Option<&Value>,
    writer: Entry,
) -> Result<Vec<Entry>, String> {
    let c = compare(live, new, schema)?;
    let ignore = stripped();
    // (Each set operation copies a set: the common cases take the fewest.)
    let changed = if c.modified.is_empty() {
        c.added.difference(ignore)
    } else {
        c.modified.union(&c.added).difference(ignore)
    };
    let mut out: Vec<Entry> = Vec::with_capacity(entries.len() + 1);
    let mut mine = Set::new();
    let mut previous_time = None;
    for e in entries {
        if e.same_manager(&writer) {
            mine = mine.union(&e.fields);
            previous_time = previous_time.or_else(|| e.time.clone());
            continue;
        }
        let mut e = e.clone();
        e.fields = e.fields.difference(&changed).difference(&c.removed);
        if !e.fields.is_empty() {
            out.push(e);
        }
    }
    let mut fields = if mine.is_empty() {
        changed.clone()
    } else {
        mine.union(&changed)
    };
    if !c.removed.is_empty() {
        fields = fields.difference(&c.removed);
    }
    if !fields.is_empty() {
        let time = if changed.is_empty() {
            previous_time
        } else {
            writer.time.clone()
        };
        out.push(Entry {
            fields,
            time,
            ..writer
        });
    }
    Ok(out)
}

/// An apply of `config` by `applier` (operation Apply) to `live` (`None`: the object does
/// not exist yet): the merged object and the new entries. Fields the applier applied last
/// time and no longer applies are removed unless another manager owns them; fields other
/// managers own that the apply would change are conflicts, unless `force` (then they
/// change hands).
///
/// `applier.time` is the time of this apply: the applier's entry takes it when the object
/// changed, and keeps its previous time when the apply changed nothing (upstream's
/// `managedFieldsUpdater`, which dates an apply only when the merge returned a new object).
pub fn apply(
    entries: &[Entry],
    live: Option<&Value>,
    config: &Value,
    schema: Option<&Value>,
    applier: Entry,
    force: bool,
) -> Result<(Value, Vec<Entry>), ApplyError> {
    let empty = Value::Object(Map::new());
    let live_v = live.unwrap_or(&empty);
    let merged = merge(Some(live_v), Some(config), schema)
        .map_err(ApplyError::Invalid)?
        .unwrap_or_else(|| empty.clone());
    let ignore = stripped();
    let applied = field_set(config, schema)
        .map_err(ApplyError::Invalid)?
        .difference(ignore);
    let last = entries
        .iter()
        .find(|e| e.same_manager(&applier))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    // Prune: what the applier owned and no longer applies, unless someone else owns it.
    let others_own = entries
        .iter()
        .filter(|e| !e.same_manager(&applier))
        .fold(applied.clone(), |acc, e| acc.union(&e.fields));
    let merged_set = field_set(&merged, schema).map_err(ApplyError::Invalid)?;
    let pruned_all = remove(&merged, &last, schema);
    let pruned_set = field_set(&pruned_all, schema).map_err(ApplyError::Invalid)?;
    let drop = merged_set
        .difference(&pruned_set.union(&others_own))
        .intersection(&last);
    let new = remove(&merged, &drop, schema);

    // Conflicts: other managers' fields that this apply adds or changes.
    let c = compare(live_v, &new, schema).map_err(ApplyError::Invalid)?;
    let changed = c.modified.union(&c.added).difference(ignore);
    let mut conflicts = Vec::new();
    let mut out = Vec::with_capacity(entries.len() + 1);
    for e in entries {
        if e.same_manager(&applier) {
            continue;
        }
        let theirs = e.fields.intersection(&changed);
        // Every owned path the apply changes, in set order (upstream's `Iterate`).
        for p in theirs.paths() {
            conflicts.push(Conflict {
                manager: e.printed(),
                key: e.identifier(),
                field: path_string(&p),
            });
        }
        let mut e = e.clone();
        e.fields = e.fields.difference(&theirs).difference(&c.removed);
        if !e.fields.is_empty() {
            out.push(e);
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(ApplyError::Conflicts(Conflicts(conflicts)));
    }
    if !applied.is_empty() {
        let previous_time = entries
            .iter()
            .find(|e| e.same_manager(&applier))
            .and_then(|e| e.time.clone());
        let time = match previous_time {
            Some(t) if new == *live_v => Some(t),
            _ => applier.time.clone(),
        };
        out.push(Entry {
            fields: applied,
            time,
            ..applier
        });
    }
    Ok((new, out))
}

/// The most Update entries an object keeps (upstream's `DefaultMaxUpdateManagers`).
pub const MAX_UPDATE_MANAGERS: usize = 10;

/// The manager that the oldest Update entries are merged into past
/// [`MAX_UPDATE_MANAGERS`] (upstream's `ancient-changes`).
pub const ANCIENT_CHANGES: &str = "ancient-changes";

/// At most `max` Update entries, as upstream's `capManagersManager` keeps them: past that,
/// the oldest Update entries (by time, an entry without one oldest; then by manager) are
/// merged, per API version, into an Update entry of [`ANCIENT_CHANGES`], which takes the
/// newest time merged into it. Apply entries are never merged.
pub fn cap_updates(mut entries: Vec<Entry>, max: usize) -> Vec<Entry> {
    let is_update = |e: &Entry| e.operation == Operation::Update;
    let mut length = entries.iter().filter(|e| is_update(e)).count();
    if length <= max {
        return entries;
    }
    let mut order: Vec<usize> = (0..entries.len())
        .filter(|&i| is_update(&entries[i]))
        .collect();
    order.sort_by(|&a, &b| {
        let (p, q) = (&entries[a], &entries[b]);
        p.time
            .cmp(&q.time)
            .then_with(|| p.manager.cmp(&q.manager))
            .then_with(|| p.api_version.cmp(&q.api_version))
            .then_with(|| p.subresource.cmp(&q.subresource))
    });
    let mut gone = vec![false; entries.len()];
    for i in order {
        if length <= max {
            break;
        }
        let bucket = entries.iter().position(|x| {
            x.manager == ANCIENT_CHANGES
                && is_update(x)
                && x.subresource.is_empty()
                && x.api_version == entries[i].api_version
        });
        match bucket {
            // The bucket itself is the oldest: it stays as it is.
            Some(b) if b == i => {}
            Some(b) => {
                let (fields, time) = (entries[i].fields.clone(), entries[i].time.clone());
                entries[b].fields = entries[b].fields.union(&fields);
                if entries[b].time < time {
                    entries[b].time = time;
                }
                gone[i] = true;
                length -= 1;
            }
            None => {
                let e = &entries[i];
                let bucket = Entry {
                    manager: ANCIENT_CHANGES.into(),
                    operation: Operation::Update,
                    api_version: e.api_version.clone(),
                    time: e.time.clone(),
                    subresource: String::new(),
                    fields: e.fields.clone(),
                };
                entries.push(bucket);
                gone.push(false);
                gone[i] = true;
            }
        }
    }
    let mut keep = gone.into_iter();
    entries.retain(|_| !keep.next().unwrap_or(false));
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A create's entry built in one walk is the general path's, for every shape: structs,
    /// maps, set and map lists (duplicates, objects in sets), empty and null containers,
    /// values of another kind than the schema's, deduced and preserved fields, ObjectMeta.
    #[test]
    fn created_is_the_general_update_of_a_create() {
        let writer = Entry {
            manager: "kubectl-create".into(),
            operation: Operation::Update,
            api_version: "g/v1".into(),
            time: Some("2026-01-01T00:00:00Z".into()),
            subresource: String::new(),
            fields: Set::new(),
        };
        let schema = with_object_meta(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "tags": {"type": "array", "x-kubernetes-list-type": "set",
                    "items": {"type": "string"}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name", "protocol"],
                    "items": {"type": "object", "properties": {
                        "name": {"type": "string"}, "protocol": {"type": "string"},
                        "port": {"type": "integer"}}}},
                "args": {"type": "array", "items": {"type": "string"}},
                "env": {"type": "object", "additionalProperties": {"type": "string"}},
                "atomic": {"type": "object", "x-kubernetes-map-type": "atomic"},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "nested": {"type": "object", "properties": {
                    "deeper": {"type": "object", "properties": {"x": {"type": "string"}}}}}
            }},
            "status": {"type": "object"}
        }}));
        let objects = [
            json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "a",
                "namespace": "n", "uid": "u", "creationTimestamp": "t", "generation": 1,
                "resourceVersion": "5", "labels": {"a": "1", "b": "2"},
                "annotations": {"x": "y"}, "finalizers": ["f1", "f2", "f1"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "C", "name": "o",
                    "uid": "ou", "controller": true}]},
                "spec": {"replicas": 3, "tags": ["a", "b", "a"],
                    "ports": [{"name": "http", "protocol": "TCP", "port": 80},
                              {"name": "dns", "protocol": "UDP"}],
                    "args": ["x"], "env": {"A": "1"}, "atomic": {"k": {"v": 1}},
                    "free": {"p": {"q": [1, 2]}, "r": null},
                    "nested": {"deeper": {"x": "1"}}},
                "status": {"ready": true, "conditions": [{"type": "A"}]}}),
            json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "only"}}),
            json!({"metadata": {}, "spec": {}, "status": null}),
            json!({"metadata": {"labels": {}}, "spec": {"tags": [], "ports": null,
                "env": {}, "nested": {"deeper": {}}}}),
            json!({"spec": {"replicas": "three", "tags": "x", "ports": {"a": 1},
                "nested": [1, 2], "env": {"A": {"deep": true}}}}),
            json!({"metadata": "odd", "extra": {"a": [{"b": 1}], "c": {"d": {"e": null}}}}),
        ];
        for obj in &objects {
            for schema in [Some(&schema), None] {
                let general = update(&[], &json!({}), obj, schema, writer.clone()).unwrap();
                let want = (!general.is_empty()).then(|| encode(&general));
                assert_eq!(
                    created(obj, schema, &writer).unwrap(),
                    want,
                    "{obj} (schema: {})",
                    schema.is_some()
                );
            }
        }
        // A map list item without its keys fails both ways.
        let bad = json!({"spec": {"ports": [{"port": 1}]}});
        assert!(created(&bad, Some(&schema), &writer).is_err());
        assert!(update(&[], &json!({}), &bad, Some(&schema), writer.clone()).is_err());
    }

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "image": {"type": "string"},
                "tags": {"type": "array", "x-kubernetes-list-type": "set",
                    "items": {"type": "string"}}
            }}
        }})
    }

    fn entry(manager: &str, op: Operation) -> Entry {
        Entry {
            manager: manager.into(),
            operation: op,
            api_version: "stable.example.com/v1".into(),
            time: Some("2026-11-28T17:00:00Z".into()),
            subresource: String::new(),
            fields: Set::new(),
        }
    }

    fn obj(spec: Value) -> Value {
        json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "x", "namespace": "default"}, "spec": spec})
    }

    fn fields_of(entries: &[Entry], manager: &str) -> String {
        entries
            .iter()
            .find(|e| e.manager == manager)
            .map(|e| e.fields.to_json())
            .unwrap_or_default()
    }

    /// The sequence of the issue: a client-side create, then an apply that changes its
    /// field (conflict, upstream's text), then forced; a second applier shares a value;
    /// an applier that drops a field removes it unless another manager owns it.
    #[test]
    fn updates_applies_conflicts_and_pruning() {
        let s = schema();
        let created = obj(json!({"replicas": 1, "image": "a"}));
        let es = update(
            &[],
            &json!({}),
            &created,
            Some(&s),
            entry("kubectl-client-side-apply", Operation::Update),
        )
        .unwrap();
        assert_eq!(
            fields_of(&es, "kubectl-client-side-apply"),
            r#"{"f:spec":{"f:image":{},"f:replicas":{},".":{}}}"#
        );

        let config = obj(json!({"replicas": 3}));
        let e = apply(
            &es,
            Some(&created),
            &config,
            Some(&s),
            entry("ssa", Operation::Apply),
            false,
        )
        .unwrap_err();
        let ApplyError::Conflicts(c) = e else {
            panic!("{e:?}")
        };
        assert_eq!(
            c.message(),
            r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using stable.example.com/v1: .spec.replicas"#
        );

        let (new, es) = apply(
            &es,
            Some(&created),
            &config,
            Some(&s),
            entry("ssa", Operation::Apply),
            true,
        )
        .unwrap();
        assert_eq!(new["spec"], json!({"replicas": 3, "image": "a"}));
        assert_eq!(fields_of(&es, "ssa"), r#"{"f:spec":{"f:replicas":{}}}"#);
        assert_eq!(
            fields_of(&es, "kubectl-client-side-apply"),
            r#"{"f:spec":{"f:image":{},".":{}}}"#
        );

        // Same value from a second applier: shared, no conflict.
        let (new, es) = apply(
            &es,
            Some(&new),
            &obj(json!({"replicas": 3, "tags": ["t"]})),
            Some(&s),
            entry("other", Operation::Apply),
            false,
        )
        .unwrap();
        assert_eq!(
            fields_of(&es, "other"),
            r#"{"f:spec":{"f:replicas":{},"f:tags":{"v:\"t\"":{}}}}"#
        );
        assert_eq!(fields_of(&es, "ssa"), r#"{"f:spec":{"f:replicas":{}}}"#);

        // "other" stops applying both: replicas stays (ssa owns it), the tag goes (its
        // emptied set becomes null, as upstream's removal leaves it).
        let (new, es) = apply(
            &es,
            Some(&new),
            &obj(json!({})),
            Some(&s),
            entry("other", Operation::Apply),
            false,
        )
        .unwrap();
        assert_eq!(
            new["spec"],
            json!({"replicas": 3, "image": "a", "tags": null})
        );
        assert_eq!(
            fields_of(&es, "other"),
            "",
            "an applier owning nothing has no entry"
        );

        // Encoded: Apply entries first.
        let managers: Vec<String> = encode(&es)
            .as_array()
            .unwrap()
            .iter()
            .map(|e| format!("{}/{}", e["manager"], e["operation"]))
            .collect();
        assert_eq!(
            managers,
            [
                r#""ssa"/"Apply""#,
                r#""kubectl-client-side-apply"/"Update""#
            ]
        );
        let encoded = encode(&es);
        assert_eq!(encode(&decode(Some(&encoded)).unwrap()), encoded);
    }

    #[test]
    fn conflicts_with_several_managers() {
        let c = Conflicts(vec![
            Conflict {
                manager: "\"b\"".into(),
                key: r#"{"manager":"b","operation":"Apply"}"#.into(),
                field: ".spec.x".into(),
            },
            Conflict {
                manager: "\"a\" using v1".into(),
                key: r#"{"manager":"a","operation":"Update","apiVersion":"v1"}"#.into(),
                field: ".spec.y".into(),
            },
            Conflict {
                manager: "\"b\"".into(),
                key: r#"{"manager":"b","operation":"Apply"}"#.into(),
                field: ".spec.z".into(),
            },
        ]);
        assert_eq!(
            c.message(),
            "Apply failed with 3 conflicts: conflicts with \"a\" using v1:\n- .spec.y\nconflicts with \"b\":\n- .spec.x\n- .spec.z"
        );
    }

    /// The order of a conflict message: one manager's fields as `Set.Iterate` walks them
    /// (members before children at each level), managers by their identifiers (a
    /// manager's subresource entry sorts before its main one: `,` < `}`).
    #[test]
    fn conflicts_follow_upstream_order() {
        let s = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"replicas": {"type": "integer"}, "image": {"type": "string"},
                "box": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}});
        let p = |names: &[&str]| -> Vec<PathElement> {
            names
                .iter()
                .map(|n| PathElement::Field(n.to_string()))
                .collect()
        };
        let mut main = entry("a", Operation::Apply);
        main.fields.insert(&p(&["spec", "replicas"]));
        main.fields.insert(&p(&["spec", "box", "size"]));
        let mut status = entry("a", Operation::Apply);
        status.subresource = "status".into();
        status.fields.insert(&p(&["spec", "image"]));
        let live = obj(json!({"replicas": 1, "image": "i", "box": {"size": 1}}));
        let e = apply(
            &[main, status],
            Some(&live),
            &obj(json!({"replicas": 2, "image": "j", "box": {"size": 2}})),
            Some(&s),
            entry("b", Operation::Apply),
            false,
        )
        .unwrap_err();
        let ApplyError::Conflicts(c) = e else {
            panic!("{e:?}")
        };
        assert_eq!(
            c.message(),
            "Apply failed with 3 conflicts: conflicts with \"a\" with subresource \"status\":\n- .spec.image\nconflicts with \"a\":\n- .spec.replicas\n- .spec.box.size"
        );
    }

    #[test]
    fn decoding_refuses_what_upstream_refuses() {
        for (bad, want) in [
            (
                json!([{"manager": "m", "operation": "Patch", "fieldsType": "FieldsV1"}]),
                "unsupported operation type: Patch",
            ),
            (
                json!([{"manager": "m", "operation": "Update", "fieldsType": "FieldsV2"}]),
                "invalid fieldsType \"FieldsV2\"",
            ),
        ] {
            assert_eq!(decode(Some(&bad)).unwrap_err(), want);
        }
        assert_eq!(decode(None).unwrap(), vec![]);
    }

    enum Op {
        Apply(&'static str, Value),
        Update(&'static str, Value),
    }

    /// Runs `ops` from nothing; the object and each manager's fieldsV1.
    fn run(ops: Vec<Op>, schema: &Value) -> (Value, Vec<(String, String)>) {
        let (mut live, mut es): (Option<Value>, Vec<Entry>) = (None, Vec::new());
        for op in ops {
            match op {
                Op::Apply(m, config) => {
                    let (new, next) = apply(
                        &es,
                        live.as_ref(),
                        &config,
                        Some(schema),
                        entry(m, Operation::Apply),
                        false,
                    )
                    .unwrap_or_else(|e| panic!("apply by {m}: {e:?}"));
                    (live, es) = (Some(new), next);
                }
                Op::Update(m, new) => {
                    let old = live.clone().unwrap_or_else(|| json!({}));
                    es =
                        update(&es, &old, &new, Some(schema), entry(m, Operation::Update)).unwrap();
                    live = Some(new);
                }
            }
        }
        let mut owners: Vec<(String, String)> = es
            .iter()
            .map(|e| (e.manager.clone(), e.fields.to_json()))
            .collect();
        owners.sort();
        (live.unwrap(), owners)
    }

    /// Set-type lists, after the scenarios of upstream's `merge/set_test.go` (`TestUpdateSet`:
    /// apply_twice, apply_update_apply_no_overlap, apply_update_apply_with_overlap,
    /// apply_twice_reorder, apply_update_apply_reorder, apply_twice_remove), on data of our
    /// own: the merged order, who owns which items, and items an applier drops.
    #[test]
    fn set_list_scenarios() {
        let s = json!({"type": "object", "properties": {"list": {"type": "array",
            "x-kubernetes-list-type": "set", "items": {"type": "string"}}}});
        let l = |items: &[&str]| json!({ "list": items });
        let owns = |items: &[&str]| {
            let mut set = Set::new();
            for i in items {
                set.insert(&[
                    PathElement::Field("list".into()),
                    PathElement::Value(json!(i)),
                ]);
            }
            set.to_json()
        };
        type Case = (
            &'static str,
            Vec<Op>,
            Vec<&'static str>,
            Vec<(&'static str, Vec<&'static str>)>,
        );
        let cases: Vec<Case> = vec![
            (
                "apply_twice",
                vec![
                    Op::Apply("default", l(&["p", "r"])),
                    Op::Apply("default", l(&["p", "q", "r", "s"])),
                ],
                vec!["p", "q", "r", "s"],
                vec![("default", vec!["p", "q", "r", "s"])],
            ),
            (
                "apply_update_apply_no_overlap",
                vec![
                    Op::Apply("default", l(&["p", "r"])),
                    Op::Update("controller", l(&["p", "q", "r", "s"])),
                    Op::Apply("default", l(&["p", "p2", "r", "r2"])),
                ],
                vec!["p", "q", "p2", "r", "s", "r2"],
                vec![
                    ("controller", vec!["q", "s"]),
                    ("default", vec!["p", "p2", "r", "r2"]),
                ],
            ),
            (
                "apply_update_apply_with_overlap",
                vec![
                    Op::Apply("default", l(&["p", "r"])),
                    Op::Update("controller", l(&["p", "q", "r", "s"])),
                    Op::Apply("default", l(&["p", "q", "r"])),
                ],
                vec!["p", "q", "r", "s"],
                vec![
                    ("controller", vec!["q", "s"]),
                    ("default", vec!["p", "q", "r"]),
                ],
            ),
            (
                "apply_twice_reorder",
                vec![
                    Op::Apply("default", l(&["p", "q", "r", "s"])),
                    Op::Apply("default", l(&["p", "s", "r", "q"])),
                ],
                vec!["p", "s", "r", "q"],
                vec![("default", vec!["p", "q", "r", "s"])],
            ),
            (
                "apply_update_apply_reorder",
                vec![
                    Op::Apply("default", l(&["p", "q", "r", "s"])),
                    Op::Update("controller", l(&["p", "s", "r", "q"])),
                    Op::Apply("default", l(&["p", "q", "r", "s"])),
                ],
                vec!["p", "q", "r", "s"],
                vec![("default", vec!["p", "q", "r", "s"])],
            ),
            (
                "apply_twice_remove",
                vec![
                    Op::Apply("default", l(&["p", "q", "r", "s"])),
                    Op::Apply("default", l(&["p", "r"])),
                ],
                vec!["p", "r"],
                vec![("default", vec!["p", "r"])],
            ),
        ];
        for (name, ops, object, managers) in cases {
            let (obj, owners) = run(ops, &s);
            assert_eq!(obj, l(&object), "{name}: object");
            let want: Vec<(String, String)> = managers
                .into_iter()
                .map(|(m, items)| (m.to_string(), owns(&items)))
                .collect();
            assert_eq!(owners, want, "{name}: managers");
        }
    }

    /// Scalars of a struct shared and dropped, after upstream's
    /// `merge/multiple_appliers_test.go` (`TestMultipleAppliersSet`: unset_scalar_sole_owner,
    /// unset_scalar_shared_with_applier, unset_scalar_shared_with_updater,
    /// updater_claims_field), in one API version, on data of our own: a dropped field stays
    /// while any other manager, applier or updater, owns it; an update takes a field from
    /// its applier without a conflict.
    #[test]
    fn struct_scalar_scenarios() {
        let s = json!({"type": "object", "properties": {"box": {"type": "object",
            "properties": {"id": {"type": "string"}, "size": {"type": "string"}}}}});
        let b = |v: Value| json!({ "box": v });
        let f = |n: &str| PathElement::Field(n.into());
        let owns = |paths: &[&[&str]]| {
            let mut set = Set::new();
            for p in paths {
                let p: Vec<PathElement> = p.iter().map(|n| f(n)).collect();
                set.insert(&p);
            }
            set.to_json()
        };
        type Case = (&'static str, Vec<Op>, Value, Vec<(&'static str, String)>);
        let cases: Vec<Case> = vec![
            (
                "unset_scalar_sole_owner",
                vec![
                    Op::Apply("one", b(json!({"id": "a", "size": "s"}))),
                    Op::Apply("one", b(json!({"id": "a"}))),
                ],
                b(json!({"id": "a"})),
                vec![("one", owns(&[&["box", "id"]]))],
            ),
            (
                "unset_scalar_shared_with_applier",
                vec![
                    Op::Apply("one", b(json!({"id": "a", "size": "s"}))),
                    Op::Apply("two", b(json!({"size": "s"}))),
                    Op::Apply("one", b(json!({"id": "a"}))),
                ],
                b(json!({"id": "a", "size": "s"})),
                vec![
                    ("one", owns(&[&["box", "id"]])),
                    ("two", owns(&[&["box", "size"]])),
                ],
            ),
            (
                "unset_scalar_shared_with_updater",
                vec![
                    Op::Update("updater", b(json!({"id": "a", "size": "s"}))),
                    Op::Apply("applier", b(json!({"id": "a", "size": "s"}))),
                    Op::Apply("applier", b(json!({"id": "a"}))),
                ],
                b(json!({"id": "a", "size": "s"})),
                vec![
                    ("applier", owns(&[&["box", "id"]])),
                    (
                        "updater",
                        owns(&[&["box"], &["box", "id"], &["box", "size"]]),
                    ),
                ],
            ),
            (
                "updater_claims_field",
                vec![
                    Op::Apply("applier", b(json!({"id": "a", "size": "s"}))),
                    Op::Update("updater", b(json!({"id": "a", "size": "m"}))),
                ],
                b(json!({"id": "a", "size": "m"})),
                vec![
                    ("applier", owns(&[&["box", "id"]])),
                    ("updater", owns(&[&["box", "size"]])),
                ],
            ),
        ];
        for (name, ops, object, managers) in cases {
            let (obj, owners) = run(ops, &s);
            assert_eq!(obj, object, "{name}: object");
            let want: Vec<(String, String)> = managers
                .into_iter()
                .map(|(m, f)| (m.to_string(), f))
                .collect();
            assert_eq!(owners, want, "{name}: managers");
        }
    }

    /// Metadata as ObjectMeta: an applier's labels and finalizers are its fields, without
    /// `.` for metadata or labels (both declared); an update adding labels owns the map too.
    #[test]
    fn object_meta_fields() {
        let s = with_object_meta(&json!({"type": "object", "properties": {
            "metadata": {"type": "object"}, "spec": {"type": "object"}}}));
        let config = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "x", "labels": {"app": "a"}, "finalizers": ["f"]}});
        let (_, es) = apply(
            &[],
            None,
            &config,
            Some(&s),
            entry("ssa", Operation::Apply),
            false,
        )
        .unwrap();
        assert_eq!(
            fields_of(&es, "ssa"),
            r#"{"f:metadata":{"f:finalizers":{"v:\"f\"":{}},"f:labels":{"f:app":{}}}}"#
        );
        let es = update(
            &[],
            &json!({"metadata": {"name": "x"}}),
            &json!({"metadata": {"name": "x", "labels": {"app": "a"}}}),
            Some(&s),
            entry("kubectl-label", Operation::Update),
        )
        .unwrap();
        assert_eq!(
            fields_of(&es, "kubectl-label"),
            r#"{"f:metadata":{"f:labels":{"f:app":{},".":{}}}}"#
        );
    }

    /// capmanagers.go: past ten Update entries the oldest are merged into
    /// `ancient-changes` of their API version, which takes the newest merged time; Apply
    /// entries stay.
    #[test]
    fn update_entries_are_capped() {
        let mut es: Vec<Entry> = (1..=12)
            .map(|i| {
                let mut e = entry(&format!("m{i:02}"), Operation::Update);
                e.time = Some(format!("2026-11-28T17:00:{i:02}Z"));
                e.fields.insert(&[PathElement::Field(format!("f{i}"))]);
                e
            })
            .collect();
        es.push(entry("applier", Operation::Apply));
        assert_eq!(
            cap_updates(es[..10].to_vec(), MAX_UPDATE_MANAGERS).len(),
            10
        );
        let out = cap_updates(es, MAX_UPDATE_MANAGERS);
        let names: Vec<&str> = out.iter().map(|e| e.manager.as_str()).collect();
        assert_eq!(
            names,
            [
                "m04",
                "m05",
                "m06",
                "m07",
                "m08",
                "m09",
                "m10",
                "m11",
                "m12",
                "applier",
                ANCIENT_CHANGES
            ]
        );
        let bucket = out.last().unwrap();
        assert_eq!(
            bucket.fields.to_json(),
            r#"{"f:f1":{},"f:f2":{},"f:f3":{}}"#
        );
        assert_eq!(bucket.time.as_deref(), Some("2026-11-28T17:00:03Z"));
        assert_eq!(bucket.operation, Operation::Update);
    }
}
