//! Redis key layout of one (tenant, group, resource) triple — pure, no IO.
//!
//! Every key of a triple shares one hash tag `{<tenant>|<resource>.<group>}`, so on a Redis
//! Cluster they live on one shard and each write is one atomic script there (DESIGN.md,
//! "Storage model"). Keys:
//! - `cp:{tag}:rev` — the revision counter (= resourceVersion of the triple);
//! - `cp:{tag}:obj` — hash `<namespace>/<name>` → `<rv>:<offset>:<json>`;
//! - `cp:{tag}:idx` — sorted set (all scores 0) of the same keys, for ordered paging by
//!   namespace then name, like upstream's etcd key order;
//! - `cp:{tag}:ev` — stream of events, entry id `<rv>-0` (watch history), bounded by age and
//!   by MAXLEN (see lua/prelude.lua);
//! - `cp:{tag}:evt` — list of `<unix second>:<first rv of that second>` checkpoints of the
//!   stream, for trimming it by age;
//! - `cp:{tag}:ch` — pub/sub channel of live events;
//! - `cp:{tag}:own` — sorted set (all scores 0) of `<owner uid>\0<namespace>/<name>`, one
//!   member per `metadata.ownerReferences[].uid` of each object, kept by the write scripts:
//!   the garbage collector's owner → dependents index (`ListDependents`);
//! - `cp:{tag}:ttl` — sorted set of `<namespace>/<name>` of the objects that expire, score =
//!   unix second of expiry (written by the create/update scripts from Redis `TIME` for a write
//!   with `ttl_seconds` > 0, removed by an update without it and by every delete); the expiry
//!   sweeper (`expiry.rs`) deletes the members that are due. Absent when nothing expires
//!   (Redis drops an empty sorted set), so the sweeper's SCAN finds only triples with work.
//!
//! Cache-invalidation notifications for a whole group/resource across tenants (CRDs,
//! namespaces) go to `cp:changes:<group>/<resource>` and carry only keys.
//!
//! Every key of a tenant starts with `cp:{<tenant>|` ([`tenant_pattern`]): purging a tenant
//! (`PurgeTenant`, server.rs) SCANs for them and parses each with [`parse_tenant_key`].

use crdplane_core::{ApiError, GroupResource};
use crdplane_proto::v1::ResourceRef;

/// The Redis keys of one (tenant, group, resource) triple (layout in the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyspace {
    /// Revision counter: the triple's current resourceVersion.
    pub rev: String,
    /// Hash `<namespace>/<name>` → `<rv>:<offset>:<json>`: the stored objects.
    pub obj: String,
    /// Sorted set of the object keys, for paging in namespace-then-name order.
    pub idx: String,
    /// Stream of events (watch history), entry id `<rv>-0`.
    pub ev: String,
    /// List of `<unix second>:<first rv>` checkpoints of the event stream, for trimming by age.
    pub evt: String,
    /// Owner uid → dependents index (see the module doc).
    pub own: String,
    /// Expiry times of the objects that expire (see the module doc).
    pub ttl: String,
    /// Pub/sub channel of live events.
    pub channel: String,
    /// The group/resource the keys belong to.
    pub gr: GroupResource,
    /// The tenant the keys belong to.
    pub tenant: String,
}

fn valid_component(s: &str, allow_empty: bool) -> bool {
    (allow_empty || !s.is_empty())
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
}

impl Keyspace {
    /// The keys of the triple `r` names; a tenant, group or resource that could break out of
    /// the hash tag (characters other than `[A-Za-z0-9._-]`, empty, > 253) is a 400 BadRequest.
    pub fn new(r: &ResourceRef) -> Result<Self, ApiError> {
        if !valid_component(&r.tenant, false)
            || !valid_component(&r.group, true)
            || !valid_component(&r.resource, false)
        {
            return Err(ApiError::bad_request(format!(
                "invalid resource reference: tenant {:?}, group {:?}, resource {:?}",
                r.tenant, r.group, r.resource
            )));
        }
        let gr = GroupResource::new(r.group.clone(), r.resource.clone());
        let tag = format!("{{{}|{}}}", r.tenant, gr);
        Ok(Self {
            rev: format!("cp:{tag}:rev"),
            obj: format!("cp:{tag}:obj"),
            idx: format!("cp:{tag}:idx"),
            ev: format!("cp:{tag}:ev"),
            evt: format!("cp:{tag}:evt"),
            own: format!("cp:{tag}:own"),
            ttl: format!("cp:{tag}:ttl"),
            channel: format!("cp:{tag}:ch"),
            gr,
            tenant: r.tenant.clone(),
        })
    }

    /// The channel for key-only change notifications of a group/resource, if it has one.
    pub fn notify_channel(&self) -> String {
        if notifies(&self.gr.group, &self.gr.resource) {
            changes_channel(&self.gr.group, &self.gr.resource)
        } else {
            String::new()
        }
    }
}

/// Whether `channel` is a (tenant, resource) triple's live-event channel, which lives in the
/// triple's hash slot (SSUBSCRIBE on a cluster), rather than a cross-tenant change channel.
pub fn is_shard_channel(channel: &str) -> bool {
    channel.starts_with("cp:{")
}

/// Resources whose every write is announced on the cross-tenant change channel (for caches):
/// CRDs and namespaces (the gateway's CRD and namespace caches), service accounts (its
/// check of service-account tokens), the RBAC objects (its per-tenant authorization
/// policies) and Tenants (`crdplane.io/tenants`, stored in tenant `root`: its tenant
/// lifecycle and purge controller).
pub fn notifies(group: &str, resource: &str) -> bool {
    match group {
        "apiextensions.k8s.io" => resource == "customresourcedefinitions",
        crdplane_core::tenancy::GROUP => resource == crdplane_core::tenancy::RESOURCE,
        "" => resource == "namespaces" || resource == "serviceaccounts",
        "rbac.authorization.k8s.io" => matches!(
            resource,
            "roles" | "clusterroles" | "rolebindings" | "clusterrolebindings"
        ),
        _ => false,
    }
}

/// The cross-tenant channel `cp:changes:<group>/<resource>` of key-only change notifications.
pub fn changes_channel(group: &str, resource: &str) -> String {
    format!("cp:changes:{group}/{resource}")
}

/// The index/hash key of one object: `<namespace>/<name>` ("" namespace for cluster scope).
pub fn object_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// ZRANGEBYLEX bounds of a page: (min, max) for a namespace ("" = all) after `start_after`.
pub fn range(namespace: &str, start_after: &str) -> (String, String) {
    let (lo, hi) = if namespace.is_empty() {
        ("-".to_string(), "+".to_string())
    } else {
        // Every "<ns>/..." sorts at or after "[<ns>/" and before "(<ns>0" ('/' + 1 == '0').
        (format!("[{namespace}/"), format!("({namespace}0"))
    };
    if start_after.is_empty() {
        return (lo, hi);
    }
    let after = format!("({start_after}");
    // Never move before the namespace's range.
    let lo = if lo == "-" || after[1..] >= lo[1..] {
        after
    } else {
        lo
    };
    (lo, hi)
}

/// SCAN pattern of every triple's ordered index (see the module doc).
pub const IDX_PATTERN: &str = "cp:{*}:idx";

/// SCAN pattern of every triple's expiry set (see the module doc).
pub const TTL_PATTERN: &str = "cp:{*}:ttl";

/// The (tenant, group, resource) of an ordered-index key `cp:{<tenant>|<resource>.<group>}:idx`
/// (group empty for the core group). Resource names are DNS labels (no dot) and tenants hold
/// no `|` ([`Keyspace::new`]), so the split is unambiguous; anything else is `None`.
pub fn parse_idx_key(key: &str) -> Option<(String, String, String)> {
    parse_triple_key(key, "idx")
}

/// The (tenant, group, resource) of an expiry-set key `cp:{<tenant>|<resource>.<group>}:ttl`,
/// as [`parse_idx_key`].
pub fn parse_ttl_key(key: &str) -> Option<(String, String, String)> {
    parse_triple_key(key, "ttl")
}

/// The kinds of key of a triple (`cp:{tag}:<kind>`, see the module doc; the pub/sub channel
/// is not a key).
pub const KEY_KINDS: [&str; 7] = ["rev", "obj", "idx", "ev", "evt", "own", "ttl"];

/// SCAN pattern of every key of `tenant`: `cp:{<tenant>|*`. The tenant must hold no glob
/// characters (`*?[]\`), as a DNS label does; and it is followed by `|`, so tenant `acme`
/// does not match the keys of `acme2`.
pub fn tenant_pattern(tenant: &str) -> String {
    format!("cp:{{{tenant}|*")
}

/// The (tenant, group, resource) of any key of a triple ([`KEY_KINDS`]) of `tenant`, as
/// [`parse_idx_key`]; `None` for another tenant's key, another kind or anything else.
pub fn parse_tenant_key(key: &str, tenant: &str) -> Option<(String, String, String)> {
    let (_, kind) = key.rsplit_once("}:")?;
    if !KEY_KINDS.contains(&kind) {
        return None;
    }
    parse_triple_key(key, kind).filter(|(t, _, _)| t == tenant)
}

fn parse_triple_key(key: &str, what: &str) -> Option<(String, String, String)> {
    let tag = key
        .strip_prefix("cp:{")?
        .strip_suffix(what)?
        .strip_suffix("}:")?;
    let (tenant, gr) = tag.split_once('|')?;
    let (resource, group) = gr.split_once('.').unwrap_or((gr, ""));
    if tenant.is_empty() || resource.is_empty() {
        return None;
    }
    Some((tenant.into(), group.into(), resource.into()))
}

/// Splits a stored value `<rv>:<offset>:<json>` into (rv, json range start).
pub fn parse_stored(v: &[u8]) -> Option<(u64, usize)> {
    let c1 = v.iter().position(|&b| b == b':')?;
    let rv: u64 = std::str::from_utf8(&v[..c1]).ok()?.parse().ok()?;
    let c2 = v[c1 + 1..].iter().position(|&b| b == b':')? + c1 + 1;
    Some((rv, c2 + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(t: &str, g: &str, res: &str) -> ResourceRef {
        ResourceRef {
            tenant: t.into(),
            group: g.into(),
            resource: res.into(),
        }
    }

    #[test]
    fn keys_share_one_hash_tag_per_tenant_and_resource() {
        let k = Keyspace::new(&r("acme", "stable.example.com", "crontabs")).unwrap();
        assert_eq!(k.rev, "cp:{acme|crontabs.stable.example.com}:rev");
        assert_eq!(k.obj, "cp:{acme|crontabs.stable.example.com}:obj");
        assert_eq!(k.channel, "cp:{acme|crontabs.stable.example.com}:ch");
        let other = Keyspace::new(&r("other", "stable.example.com", "crontabs")).unwrap();
        assert_ne!(k.obj, other.obj, "tenant is part of every key");
        assert_eq!(
            Keyspace::new(&r("t", "", "namespaces"))
                .unwrap()
                .notify_channel(),
            "cp:changes:/namespaces"
        );
        assert_eq!(k.notify_channel(), "");
    }

    #[test]
    fn hostile_references_are_rejected() {
        assert!(Keyspace::new(&r("a}b", "g", "r")).is_err());
        assert!(Keyspace::new(&r("", "g", "r")).is_err());
        assert!(Keyspace::new(&r("t", "g", "r s")).is_err());
    }

    #[test]
    fn ranges() {
        assert_eq!(range("", ""), ("-".into(), "+".into()));
        assert_eq!(
            range("default", ""),
            ("[default/".into(), "(default0".into())
        );
        assert_eq!(
            range("default", "default/a"),
            ("(default/a".into(), "(default0".into())
        );
        assert_eq!(range("", "ns/a"), ("(ns/a".into(), "+".into()));
        // a start key before the namespace cannot widen the range
        assert_eq!(range("b", "a/x"), ("[b/".into(), "(b0".into()));
        assert!("default/x" > "default/" && "default/x" < "default0");
        assert!(
            "default-x/y" > "default0" || "default-x/y" < "default/",
            "other namespaces fall outside"
        );
    }

    #[test]
    fn index_keys_name_their_triple() {
        for (t, g, res) in [
            ("acme", "stable.example.com", "crontabs"),
            ("t1", "", "namespaces"),
            ("_crdplane", "crdplane.io", "pendingdeletions"),
        ] {
            let k = Keyspace::new(&r(t, g, res)).unwrap();
            assert_eq!(
                parse_idx_key(&k.idx),
                Some((t.to_string(), g.to_string(), res.to_string()))
            );
            assert_eq!(
                parse_ttl_key(&k.ttl),
                Some((t.to_string(), g.to_string(), res.to_string()))
            );
            assert_eq!(parse_ttl_key(&k.idx), None);
            assert_eq!(parse_idx_key(&k.ttl), None);
        }
        for bad in [
            "cp:{acme|crontabs.x}:obj",
            "cp:{acmecrontabs}:idx",
            "cp:{|crontabs}:idx",
            "other",
        ] {
            assert_eq!(parse_idx_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn any_key_of_a_tenant_names_its_triple() {
        let k = Keyspace::new(&r("acme", "stable.example.com", "crontabs")).unwrap();
        let want = Some((
            "acme".to_string(),
            "stable.example.com".to_string(),
            "crontabs".to_string(),
        ));
        for key in [&k.rev, &k.obj, &k.idx, &k.ev, &k.evt, &k.own, &k.ttl] {
            assert_eq!(parse_tenant_key(key, "acme"), want, "{key}");
            assert_eq!(parse_tenant_key(key, "acme2"), None, "{key}");
            assert_eq!(parse_tenant_key(key, "acm"), None, "{key}");
        }
        let core = Keyspace::new(&r("acme", "", "namespaces")).unwrap();
        assert_eq!(
            parse_tenant_key(&core.evt, "acme"),
            Some(("acme".into(), "".into(), "namespaces".into()))
        );
        let other = Keyspace::new(&r("acme2", "", "namespaces")).unwrap();
        assert_eq!(parse_tenant_key(&other.obj, "acme"), None);
        for bad in [
            &k.channel,
            "cp:{acme|crontabs.x}:other",
            "cp:{acme|crontabs.x}",
            "cp:{acme|}:obj",
            "cp:{|crontabs}:obj",
            "cp:{acmecrontabs}:obj",
            "cp:changes:/namespaces",
            "cp:epoch",
            "other",
        ] {
            assert_eq!(parse_tenant_key(bad, "acme"), None, "{bad}");
        }
        assert_eq!(tenant_pattern("acme"), "cp:{acme|*");
    }

    #[test]
    fn tenants_and_cache_resources_notify() {
        for (g, res) in [
            ("apiextensions.k8s.io", "customresourcedefinitions"),
            ("", "namespaces"),
            ("", "serviceaccounts"),
            ("rbac.authorization.k8s.io", "clusterrolebindings"),
            ("crdplane.io", "tenants"),
        ] {
            assert!(notifies(g, res), "{g}/{res}");
        }
        for (g, res) in [
            ("", "configmaps"),
            ("crdplane.io", "pendingdeletions"),
            ("stable.example.com", "tenants"),
        ] {
            assert!(!notifies(g, res), "{g}/{res}");
        }
    }

    #[test]
    fn stored_values() {
        assert_eq!(parse_stored(b"12:5:{\"a\"}"), Some((12, 5)));
        assert_eq!(parse_stored(b"x:5:{}"), None);
        assert_eq!(parse_stored(b"12"), None);
    }
}
