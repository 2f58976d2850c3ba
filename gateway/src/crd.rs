//! What the gateway knows about one served CRD (`CrdInfo`), built once per CRD generation
//! from its JSON, and the per-gateway cache of them keyed by (tenant, group, plural).
//!
//! Request path: RequestInfo → `CrdCache::resolve` (registry `Resolve` on a miss) → the
//! custom-resource handlers. Freshness: the cache follows the storage `Changes` stream of
//! CRDs (any change to a tenant's CRD drops that CRD's entries), and this gateway's own CRD
//! writes drop entries synchronously.

use crate::table::TableConvertor;
use crdplane_core::ApiError;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// One entry of the CRD's `spec.versions`, as the gateway serves it.
#[derive(Debug)]
pub struct VersionInfo {
    /// Version name, e.g. `v1`.
    pub name: String,
    /// `served`: the version's endpoints exist.
    pub served: bool,
    /// `storage`: objects are stored in this version.
    pub storage: bool,
    /// `deprecated`: responses carry a deprecation warning.
    pub deprecated: bool,
    /// `deprecationWarning`, replacing the default warning text.
    pub deprecation_warning: Option<String>,
    /// `subresources.status` is set: `/status` is served and the main resource ignores status.
    pub has_status: bool,
    /// `subresources.scale` (the replica paths), when `/scale` is served.
    pub scale: Option<Value>,
    /// The schema declares defaults somewhere (the read path must apply them).
    pub has_defaults: bool,
    /// `selectableFields[].jsonPath`: extra fields a field selector may use.
    pub selectable_fields: Vec<String>,
    /// Table printing by the version's `additionalPrinterColumns`.
    pub table: TableConvertor,
    /// The schema field management reads objects of this version with: `openAPIV3Schema`
    /// with `metadata` typed as ObjectMeta (apiextensions' type converter for managedFields).
    pub field_schema: Value,
}

/// What the gateway serves a CRD's resources by, parsed once from its JSON.
#[derive(Debug)]
pub struct CrdInfo {
    /// `metadata.name` (`<plural>.<group>`).
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// `spec.group`.
    pub group: String,
    /// `status.acceptedNames.plural`, else `spec.names.plural`.
    pub plural: String,
    /// `spec.names.singular` (lowercased kind by default).
    pub singular: String,
    /// `status.acceptedNames.kind`, else `spec.names.kind`.
    pub kind: String,
    /// `spec.names.listKind` (`<kind>List` by default).
    pub list_kind: String,
    /// `spec.scope` is `Namespaced`.
    pub namespaced: bool,
    /// `spec.versions`, in the CRD's order.
    pub versions: Vec<VersionInfo>,
    /// Name of the version with `storage: true`.
    pub storage_version: String,
    /// The CRD's `Terminating` condition is True (it is being deleted): no new objects.
    pub terminating: bool,
    /// [`serving_hash`] of this CRD: what its resources' watches are bound to.
    pub serving: u64,
    /// The CRD object itself.
    pub json: Value,
}

/// A digest of what upstream rebuilds a CRD's serving storage for — its `spec` and
/// `status.acceptedNames` (apiextensions-apiserver `customresource_handler.go`,
/// `updateCustomResourceDefinition`: other changes, e.g. conditions or the generation bump of
/// a graceful delete, keep the storage and its watches).
pub fn serving_hash(crd: &Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    crd.get("spec")
        .unwrap_or(&Value::Null)
        .to_string()
        .hash(&mut h);
    crd.pointer("/status/acceptedNames")
        .unwrap_or(&Value::Null)
        .to_string()
        .hash(&mut h);
    h.finish()
}

impl CrdInfo {
    /// Reads what serving needs from a CRD object (missing fields read as empty).
    pub fn from_json(crd: Value) -> Result<Self, ApiError> {
        let s = |p: &str| {
            crd.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let names = "/status/acceptedNames";
        let kind = if s(&format!("{names}/kind")).is_empty() {
            s("/spec/names/kind")
        } else {
            s(&format!("{names}/kind"))
        };
        let plural = if s(&format!("{names}/plural")).is_empty() {
            s("/spec/names/plural")
        } else {
            s(&format!("{names}/plural"))
        };
        let mut singular = s("/spec/names/singular");
        if singular.is_empty() {
            singular = kind.to_lowercase();
        }
        let mut list_kind = s("/spec/names/listKind");
        if list_kind.is_empty() {
            list_kind = format!("{kind}List");
        }
        let mut versions = Vec::new();
        let mut storage_version = String::new();
        for v in crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = v
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let storage = v.get("storage").and_then(Value::as_bool).unwrap_or(false);
            if storage {
                storage_version = name.clone();
            }
            let schema = v.pointer("/schema/openAPIV3Schema");
            let cols = v
                .get("additionalPrinterColumns")
                .cloned()
                .unwrap_or(Value::Array(vec![]));
            versions.push(VersionInfo {
                served: v.get("served").and_then(Value::as_bool).unwrap_or(false),
                storage,
                deprecated: v
                    .get("deprecated")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                deprecation_warning: v
                    .get("deprecationWarning")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                has_status: v.pointer("/subresources/status").is_some(),
                scale: v.pointer("/subresources/scale").cloned(),
                has_defaults: schema.is_some_and(has_default),
                selectable_fields: v
                    .get("selectableFields")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
                    .map(|p| p.trim_start_matches('.').to_string())
                    .collect(),
                table: TableConvertor::new(&cols),
                field_schema: crdplane_core::managedfields::with_object_meta(
                    schema.unwrap_or(&serde_json::json!({"type": "object"})),
                ),
                name,
            });
        }
        Ok(Self {
            name: s("/metadata/name"),
            uid: s("/metadata/uid"),
            generation: crd
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            group: s("/spec/group"),
            namespaced: s("/spec/scope") != "Cluster",
            plural,
            singular,
            kind,
            list_kind,
            versions,
            storage_version,
            // customresource_handler.go: the Terminating condition, not the timestamp.
            terminating: crd
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c.get("type").and_then(Value::as_str) == Some("Terminating")
                            && c.get("status").and_then(Value::as_str) == Some("True")
                    })
                }),
            serving: serving_hash(&crd),
            json: crd,
        })
    }

    /// The served version named `v`.
    pub fn version(&self, v: &str) -> Option<&VersionInfo> {
        self.versions.iter().find(|x| x.name == v && x.served)
    }

    /// The custom resource's group/resource (`<plural>.<group>`).
    pub fn gr(&self) -> crdplane_core::GroupResource {
        crdplane_core::GroupResource::new(self.group.clone(), self.plural.clone())
    }
}

fn has_default(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => m.contains_key("default") || m.values().any(has_default),
        Value::Array(a) => a.iter().any(has_default),
        _ => false,
    }
}

type Key = (String, String, String);

/// Resolved CRDs per (tenant, group, plural).
#[derive(Default)]
pub struct CrdCache {
    entries: RwLock<HashMap<Key, Arc<CrdInfo>>>,
}

impl CrdCache {
    /// The cached CRD serving `group`/`plural` in `tenant`.
    pub fn get(&self, tenant: &str, group: &str, plural: &str) -> Option<Arc<CrdInfo>> {
        self.entries
            .read()
            .expect("cache lock")
            .get(&(tenant.to_string(), group.to_string(), plural.to_string()))
            .cloned()
    }

    /// Caches a resolved CRD of `tenant` under its group and plural.
    pub fn insert(&self, tenant: &str, info: Arc<CrdInfo>) {
        let key = (tenant.to_string(), info.group.clone(), info.plural.clone());
        self.entries.write().expect("cache lock").insert(key, info);
    }

    /// Drops every entry of `tenant` that came from the CRD named `crd_name`.
    pub fn invalidate(&self, tenant: &str, crd_name: &str) {
        self.entries
            .write()
            .expect("cache lock")
            .retain(|k, v| !(k.0 == tenant && v.name == crd_name));
    }

    /// Drops every entry.
    pub fn clear(&self) {
        self.entries.write().expect("cache lock").clear();
    }

    /// Number of cached entries.
    pub fn len(&self) -> usize {
        self.entries.read().expect("cache lock").len()
    }

    /// No entry is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A CRD of a tenant after a change: its uid and serving hash now, or None when it no
/// longer exists. Sent by the gateway's CRD cache follower to the watches of that CRD's
/// resources.
#[derive(Debug, Clone)]
pub struct CrdNow {
    /// The CRD's tenant.
    pub tenant: String,
    /// The CRD's name (`<plural>.<group>`).
    pub name: String,
    /// Its uid and serving hash now; None when it no longer exists.
    pub now: Option<(String, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crontab() -> Value {
        json!({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
          "metadata":{"name":"crontabs.stable.example.com","uid":"u1","generation":2},
          "spec":{"group":"stable.example.com","scope":"Namespaced",
            "names":{"plural":"crontabs","singular":"crontab","kind":"CronTab","shortNames":["ct"]},
            "versions":[{"name":"v1","served":true,"storage":true,
              "schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"replicas":{"type":"integer","default":1}}}}}},
              "subresources":{"status":{}}},
              {"name":"v2","served":false,"storage":false}]},
          "status":{"acceptedNames":{"plural":"crontabs","kind":"CronTab"}}})
    }

    #[test]
    fn info_from_crd() {
        let i = CrdInfo::from_json(crontab()).unwrap();
        assert_eq!(
            (i.kind.as_str(), i.list_kind.as_str(), i.singular.as_str()),
            ("CronTab", "CronTabList", "crontab")
        );
        assert!(i.namespaced);
        assert_eq!(i.storage_version, "v1");
        assert!(i.version("v1").unwrap().has_status);
        assert!(i.version("v1").unwrap().has_defaults);
        assert!(
            i.version("v2").is_none(),
            "unserved versions are not served"
        );
        assert_eq!(i.generation, 2);
    }

    #[test]
    fn terminating_follows_the_condition() {
        let mut c = crontab();
        c["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert!(!CrdInfo::from_json(c.clone()).unwrap().terminating);
        c["status"]["conditions"] = json!([{"type": "Terminating", "status": "True"}]);
        assert!(CrdInfo::from_json(c.clone()).unwrap().terminating);
        c["status"]["conditions"] = json!([{"type": "Terminating", "status": "False"}]);
        assert!(!CrdInfo::from_json(c).unwrap().terminating);
    }

    #[test]
    fn cache_invalidation_is_per_tenant_and_crd() {
        let c = CrdCache::default();
        c.insert("a", Arc::new(CrdInfo::from_json(crontab()).unwrap()));
        c.insert("b", Arc::new(CrdInfo::from_json(crontab()).unwrap()));
        c.invalidate("a", "crontabs.stable.example.com");
        assert!(c.get("a", "stable.example.com", "crontabs").is_none());
        assert!(c.get("b", "stable.example.com", "crontabs").is_some());
    }
}
