//! The garbage collector's durable work items, shared by their writers (the gateway, when it
//! deletes or marks an object; the registry's collector, when it deletes a dependent that
//! owns others) and their one consumer (`services/registry/src/gc.rs`).
//!
//! An item says "the object with this uid is being deleted or is gone: deal with its
//! dependents" (upstream: the graph builder's `attemptToDelete`/`attemptToOrphan` queues of
//! `pkg/controller/garbagecollector`, which are in memory there; here they live in Redis so
//! that a restart of any process resumes them). Items are entries of the registry's deletion
//! queue (tenant `_crdplane`, group `crdplane.io`, the tenant's bucket resource
//! [`queue_resource`]), namespace slot = the object's tenant, name `gc.<uid>`. Pure: building
//! and reading the entry JSON, and the bucket of a tenant.
//!
//! The queue is split into [`QUEUE_BUCKETS`] resources, each one (tenant, resource) triple
//! and so one hash slot: on a Redis Cluster the deletion work of all tenants spreads over
//! that many slots (and so over the shards) instead of loading one. A tenant's entries all
//! live in one bucket, chosen by a fixed hash of its name ([`bucket_of`]); bucket 0 keeps the
//! queue's earlier, unsplit name, so entries an earlier version recorded are still found
//! (the registry moves an entry it finds in another bucket than its tenant's).
//!
//! A *verification* item (`"verify": true`) is recorded after a write that adds owner
//! references: "an object now names this owner: check that it exists". Upstream's graph
//! builder adds a virtual node for an owner it has not observed and `attemptToDeleteItem`
//! verifies it with a live lookup (`graph_builder.go` `processGraphChanges`,
//! `garbagecollector.go` `isDangling`). Its owner may carry only the reference's group and
//! kind (`resource` empty); the collector resolves them. A deletion record of the same uid
//! turns a verification item into a deletion item, never the other way round.
use serde_json::{Value, json};

/// Tenant that holds the deletion queue (internal, not a user tenant).
pub const QUEUE_TENANT: &str = "_crdplane";
/// API group of the deletion queue resource.
pub const QUEUE_GROUP: &str = "crdplane.io";
/// Resource name of the deletion queue.
pub const QUEUE_RESOURCE: &str = "pendingdeletions";
/// Prefix of a garbage-collection entry's name.
pub const PREFIX: &str = "gc.";
/// Number of resources (hash slots) the queue is split into.
pub const QUEUE_BUCKETS: usize = 16;

/// The resource of queue bucket `b`: [`QUEUE_RESOURCE`] for bucket 0, else
/// `pendingdeletions-<b>`.
pub fn bucket_resource(b: usize) -> String {
    if b == 0 {
        QUEUE_RESOURCE.to_string()
    } else {
        format!("{QUEUE_RESOURCE}-{b}")
    }
}

/// The bucket of `tenant`'s entries: 64-bit FNV-1a of its name modulo [`QUEUE_BUCKETS`] (a
/// hash fixed by its definition, so every process and version agrees on it).
pub fn bucket_of(tenant: &str) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in tenant.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % QUEUE_BUCKETS as u64) as usize
}

/// The queue resource holding `tenant`'s entries.
pub fn queue_resource(tenant: &str) -> String {
    bucket_resource(bucket_of(tenant))
}

/// The object whose dependents are to be handled.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Owner {
    /// API group of the owner (empty for the core group).
    pub group: String,
    /// Plural resource name (`namespaces` for a namespace).
    pub resource: String,
    /// "" when cluster-scoped.
    pub namespace: String,
    /// The owner's name.
    pub name: String,
    /// The owner's `metadata.uid`; items are keyed by it.
    pub uid: String,
    /// The owner's kind (needed when `resource` is empty: a reference not yet resolved).
    pub kind: String,
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
            kind: obj
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        })
    }

    /// The owners named by `new`'s `metadata.ownerReferences` whose uids `old` (the object
    /// before the write, if any) does not name: the references a write adds. Namespaced
    /// owners are looked up in the dependent's namespace, so that is recorded with them.
    pub fn added_refs(new: &Value, old: Option<&Value>) -> Vec<Self> {
        let refs = |v: &Value| -> Vec<Value> {
            v.pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let str_of =
            |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let before: Vec<String> = old
            .map(|o| refs(o).iter().map(|r| str_of(r, "uid")).collect())
            .unwrap_or_default();
        let ns = new
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        let mut out: Vec<Self> = Vec::new();
        for r in refs(new) {
            let uid = str_of(&r, "uid");
            if uid.is_empty() || before.contains(&uid) || out.iter().any(|o| o.uid == uid) {
                continue;
            }
            let api_version = str_of(&r, "apiVersion");
            let group = match api_version.split_once('/') {
                Some((g, _)) => g.to_string(),
                None => String::new(),
            };
            out.push(Self {
                group,
                resource: String::new(),
                namespace: ns.to_string(),
                name: str_of(&r, "name"),
                uid,
                kind: str_of(&r, "kind"),
            });
        }
        out
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
                  "namespace": owner.namespace, "name": owner.name, "uid": owner.uid,
                  "kind": owner.kind},
        "touchedAt": now_ms})
}

/// A new verification entry (see the module doc), named by [`verify_entry_name`].
pub fn verify_entry(tenant: &str, owner: &Owner, now_ms: u64) -> Value {
    let mut e = entry(tenant, owner, now_ms);
    e["verify"] = json!(true);
    e["metadata"]["name"] = json!(verify_entry_name(owner));
    e
}

/// The name of the verification item of a reference to `owner` looked up in
/// `owner.namespace`: one item per (owner uid, lookup namespace). References to one owner
/// uid from two namespaces ask two questions (the owner exists in one namespace at most, so
/// the other's dependents are dangling: upstream's graph has a virtual node per such
/// reference), and recording the second must not be absorbed by the first. A reference
/// looked up cluster-wide shares the owner's deletion item name ([`entry_name`]).
pub fn verify_entry_name(owner: &Owner) -> String {
    if owner.namespace.is_empty() {
        entry_name(&owner.uid)
    } else {
        format!("{}.{}", entry_name(&owner.uid), owner.namespace)
    }
}

/// Whether the entry only asks to verify that its owner exists.
pub fn is_verify(entry: &Value) -> bool {
    entry.get("verify") == Some(&json!(true))
}

/// Records the entry again (an existing entry of the same uid) as a deletion: bumps
/// `touchedAt`, keeps the lease, so the worker holding it sees a new resourceVersion and
/// makes another pass; a verification entry becomes a deletion entry of `owner` (whose
/// resource is known, unlike a reference's).
pub fn touch(entry: &mut Value, owner: &Owner, now_ms: u64) {
    let fresh = self::entry("", owner, now_ms);
    if let Some(m) = entry.as_object_mut() {
        m.insert("touchedAt".into(), json!(now_ms));
        m.insert("owner".into(), fresh["owner"].clone());
        m.remove("verify");
    }
}

/// Records the entry again as a verification: bumps `touchedAt` only (a deletion entry
/// stays one).
pub fn touch_verify(entry: &mut Value, now_ms: u64) {
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
        resource: s("resource").unwrap_or_default(),
        namespace: s("namespace").unwrap_or_default(),
        name: s("name")?,
        uid: s("uid")?,
        kind: s("kind").unwrap_or_default(),
    })
}

/// When the entry was last recorded (`touchedAt`, ms since the epoch); 0 if absent.
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

/// Sets the entry's lease to `holder` until `until_ms` (ms since the epoch).
pub fn set_lease(entry: &mut Value, holder: &str, until_ms: u64) {
    if let Some(m) = entry.as_object_mut() {
        m.insert("lease".into(), json!({"holder": holder, "until": until_ms}));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tenants_spread_over_buckets() {
        use super::*;
        assert_eq!(bucket_resource(0), "pendingdeletions");
        assert_eq!(bucket_resource(3), "pendingdeletions-3");
        // Fixed by definition: the same on every process and version.
        assert_eq!(bucket_of(""), (0xcbf2_9ce4_8422_2325u64 % 16) as usize);
        assert_eq!(queue_resource("acme"), bucket_resource(bucket_of("acme")));
        let mut counts = [0usize; QUEUE_BUCKETS];
        for t in 0..1600 {
            counts[bucket_of(&format!("tenant-{t}"))] += 1;
        }
        assert!(
            counts.iter().all(|&n| (60..=140).contains(&n)),
            "uneven buckets: {counts:?}"
        );
    }

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
        assert_eq!(owner_of(&e), Some(o.clone()));
        assert_eq!(touched_at(&e), 5);
        assert_eq!(lease(&e), None);
        set_lease(&mut e, "r1", 99);
        touch(&mut e, &o, 7);
        assert_eq!(lease(&e), Some(("r1".into(), 99)));
        assert_eq!(touched_at(&e), 7);
        assert!(Owner::of("", "x", &json!({"metadata": {"name": "w"}})).is_none());
    }

    #[test]
    fn verification_entries() {
        let o = Owner::of(
            "a.io",
            "widgets",
            &json!({"metadata": {"name": "w", "uid": "u1"}}),
        )
        .unwrap();
        let mut v = verify_entry("t1", &o, 1);
        assert!(is_verify(&v));
        touch_verify(&mut v, 2);
        assert!(is_verify(&v));
        let full = Owner {
            resource: "widgets".into(),
            ..o.clone()
        };
        let mut v2 = verify_entry(
            "t1",
            &Owner {
                resource: String::new(),
                ..o.clone()
            },
            1,
        );
        touch(&mut v2, &full, 3);
        assert!(!is_verify(&v2));
        assert_eq!(owner_of(&v2).unwrap().resource, "widgets");
        touch(&mut v, &o, 3);
        assert!(!is_verify(&v));
        let mut d = entry("t1", &o, 1);
        touch_verify(&mut d, 2);
        assert!(!is_verify(&d));
    }

    #[test]
    fn added_references() {
        let r = |uid: &str| json!({"apiVersion": "a.io/v1", "kind": "A", "name": format!("n-{uid}"), "uid": uid});
        let new = json!({"metadata": {"namespace": "ns", "ownerReferences": [r("u1"), r("u2"),
            {"apiVersion": "v1", "kind": "Namespace", "name": "x", "uid": "u3"}, r("u1")]}});
        let old = json!({"metadata": {"ownerReferences": [r("u2")]}});
        let added = Owner::added_refs(&new, Some(&old));
        let uids: Vec<&str> = added.iter().map(|o| o.uid.as_str()).collect();
        assert_eq!(uids, ["u1", "u3"]);
        assert_eq!(added[0].group, "a.io");
        assert_eq!(added[0].kind, "A");
        assert_eq!(added[0].namespace, "ns");
        assert_eq!(added[0].resource, "");
        assert_eq!(added[1].group, "");
        assert_eq!(Owner::added_refs(&new, Some(&new)).len(), 0);
        assert_eq!(Owner::added_refs(&old, None).len(), 1);
    }
}
