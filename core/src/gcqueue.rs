//! The garbage collector's durable work items, shared by their writers (the gateway, when it
//! deletes or marks an object; the registry's collector, when it deletes a dependent that
//! owns others) and their one consumer (`services/registry/src/gc.rs`).
//!
//! An item says "the object with this uid is being deleted or is gone: deal with its
//! dependents" (upstream: the graph builder's `attemptToDelete`/`attemptToOrphan` queues of
//! `pkg/controller/garbagecollector`, which are in memory there; here they live in Redis so
//! that a restart of any process resumes them). Items are entries of the registry's deletion
//! queue resource (tenant `_crdplane`, `crdplane.io/pendingdeletions`), namespace slot = the
//! object's tenant, name `gc.<uid>`. Pure: building and reading the entry JSON only.
use serde_json::{Value, json};

pub const QUEUE_TENANT: &str = "_crdplane";
pub const QUEUE_GROUP: &str = "crdplane.io";
pub const QUEUE_RESOURCE: &str = "pendingdeletions";
/// Prefix of a garbage-collection entry's name.
pub const PREFIX: &str = "gc.";

/// The object whose dependents are to be handled.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Owner {
    pub group: String,
    /// Plural resource name (`namespaces` for a namespace).
    pub resource: String,
    /// "" when cluster-scoped.
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl Owner {
    /// The owner of an object's JSON (`None` without name or uid).
    pub fn of(group: &str, resource: &str, obj: &Value) -> Option<Self> {
        let s = |k: &str| {
            obj.pointer(&format!("/metadata/{k}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let (name, uid) = (s("name"), s("uid"));
        if name.is_empty() || uid.is_empty() {
            return None;
        }
        Some(Self {
            group: group.into(),
            resource: resource.into(),
            namespace: s("namespace"),
            name,
            uid,
        })
    }
}

/// The entry's name for an owner uid.
pub fn entry_name(uid: &str) -> String {
    format!("{PREFIX}{uid}")
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A new entry; `touchedAt` is when it was (last) recorded.
pub fn entry(tenant: &str, owner: &Owner, now_ms: u64) -> Value {
    json!({"apiVersion": "crdplane.io/v1", "kind": "PendingDeletion",
        "metadata": {"name": entry_name(&owner.uid), "namespace": tenant, "resourceVersion": ""},
        "owner": {"group": owner.group, "resource": owner.resource,
                  "namespace": owner.namespace, "name": owner.name, "uid": owner.uid},
        "touchedAt": now_ms})
}

/// Records the entry again (an existing entry of the same uid): bumps `touchedAt`, keeps the
/// lease, so the worker holding it sees a new resourceVersion and makes another pass.
pub fn touch(entry: &mut Value, now_ms: u64) {
    if let Some(m) = entry.as_object_mut() {
        m.insert("touchedAt".into(), json!(now_ms));
    }
}

/// The owner an entry names.
pub fn owner_of(entry: &Value) -> Option<Owner> {
    let o = entry.get("owner")?;
    let s = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
    Some(Owner {
        group: s("group").unwrap_or_default(),
        resource: s("resource")?,
        namespace: s("namespace").unwrap_or_default(),
        name: s("name")?,
        uid: s("uid")?,
    })
}

pub fn touched_at(entry: &Value) -> u64 {
    entry.get("touchedAt").and_then(Value::as_u64).unwrap_or(0)
}

/// (holder, until ms) of the entry's lease, if any.
pub fn lease(entry: &Value) -> Option<(String, u64)> {
    let l = entry.get("lease")?;
    Some((
        l.get("holder")?.as_str()?.to_string(),
        l.get("until")?.as_u64()?,
    ))
}

pub fn set_lease(entry: &mut Value, holder: &str, until_ms: u64) {
    if let Some(m) = entry.as_object_mut() {
        m.insert("lease".into(), json!({"holder": holder, "until": until_ms}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip() {
        let o = Owner::of(
            "a.io",
            "widgets",
            &json!({"metadata": {"name": "w", "namespace": "n", "uid": "u1"}}),
        )
        .unwrap();
        let mut e = entry("t1", &o, 5);
        assert_eq!(e["metadata"]["name"], "gc.u1");
        assert_eq!(e["metadata"]["namespace"], "t1");
        assert_eq!(owner_of(&e), Some(o));
        assert_eq!(touched_at(&e), 5);
        assert_eq!(lease(&e), None);
        set_lease(&mut e, "r1", 99);
        touch(&mut e, 7);
        assert_eq!(lease(&e), Some(("r1".into(), 99)));
        assert_eq!(touched_at(&e), 7);
        assert!(Owner::of("", "x", &json!({"metadata": {"name": "w"}})).is_none());
    }
}
