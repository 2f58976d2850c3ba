//! Encryption at rest in the gateway: which resources `--encryption-provider-config` may
//! name, and [`Sealing`], the one resource of one tenant's view of it that the built-in
//! store (`stores/builtin/store.rs`: `BuiltinStore`; the list and watch paths of `builtin.rs`) runs every stored object
//! through. The providers and the envelope are `crdplane_apiserver::encryption`.
//!
//! Where it sits: between the strategies of the built-in types and the storage service,
//! after `stored_form` on writes and before `served_form` on reads. A failure to open is a
//! 500 Status naming why (upstream answers `Internal error occurred` too); a sealed object
//! is never served as it is stored. Without a configuration for a resource, an object that
//! is nevertheless sealed (the configuration was dropped) is such a 500 as well.
//!
//! Only resources whose objects every gateway path reads through the built-in store can be
//! sealed ([`ENCRYPTABLE`]); the RBAC types and service accounts are read by the
//! authorizer and the token paths directly, and custom resources and namespaces by their
//! own stores, so the configuration may not name them.

use crdplane_apiserver::encryption::{EncryptionConfig, Transformer, looks_sealed};
use crdplane_core::ApiError;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// The `(group, resource)` pairs the configuration may name (as stored).
pub const ENCRYPTABLE: [(&str, &str); 4] = [
    ("", "secrets"),
    ("", "configmaps"),
    ("", "events"),
    ("coordination.k8s.io", "leases"),
];

/// Loads `--encryption-provider-config` and checks that it names only [`ENCRYPTABLE`]
/// resources.
pub fn load(path: &Path) -> Result<EncryptionConfig, String> {
    let c = EncryptionConfig::load(path)?;
    for (g, r) in c.resources() {
        if !ENCRYPTABLE.contains(&(g, r)) {
            let name = if g.is_empty() {
                r.to_string()
            } else {
                format!("{r}.{g}")
            };
            return Err(format!(
                "{name}: crdplane encrypts secrets, configmaps, events and leases.coordination.k8s.io only"
            ));
        }
    }
    Ok(c)
}

/// One stored resource of one tenant under the configuration (see the module docs).
#[derive(Clone)]
pub struct Sealing {
    transformer: Option<Arc<Transformer>>,
    /// The resource is one a configuration may name ([`ENCRYPTABLE`]): only then can a
    /// stored object be sealed at all.
    encryptable: bool,
    tenant: String,
    group: &'static str,
    resource: &'static str,
}

impl Sealing {
    /// `tenant`'s objects stored as `storage` (group, resource) under `config`.
    pub fn new(
        config: Option<&Arc<EncryptionConfig>>,
        tenant: &str,
        storage: (&'static str, &'static str),
    ) -> Self {
        Self {
            transformer: config
                .and_then(|c| c.for_resource(storage.0, storage.1))
                .cloned(),
            encryptable: ENCRYPTABLE.contains(&storage),
            tenant: tenant.to_string(),
            group: storage.0,
            resource: storage.1,
        }
    }

    /// Whether the configuration names this resource (its objects must be opened).
    pub fn active(&self) -> bool {
        self.transformer.is_some()
    }

    /// The object to store for `obj`.
    pub fn seal(&self, obj: Value) -> Result<Value, ApiError> {
        match &self.transformer {
            None => Ok(obj),
            Some(t) => t
                .seal(obj, &self.tenant, self.group, self.resource)
                .map_err(ApiError::internal),
        }
    }

    /// The object stored as `stored`.
    pub fn open(&self, stored: Value) -> Result<Value, ApiError> {
        self.open_checked(stored).map(|(v, _)| v)
    }

    /// [`Sealing::open`], and whether the stored form is stale (sealed with a key that no
    /// longer writes, or plaintext), so an update must rewrite it.
    pub fn open_checked(&self, stored: Value) -> Result<(Value, bool), ApiError> {
        match &self.transformer {
            Some(t) => t
                .open_checked(stored, &self.tenant, self.group, self.resource)
                .map_err(ApiError::internal),
            None if crdplane_apiserver::encryption::is_envelope(&stored) => Err(
                ApiError::internal(crdplane_apiserver::encryption::not_configured(&stored)),
            ),
            None => Ok((stored, false)),
        }
    }

    /// For paths that pass stored bytes through without parsing them (only taken while the
    /// resource is not [`Sealing::active`]): refuses bytes that hold a sealed object.
    pub fn check_plain(&self, stored: &[u8]) -> Result<(), ApiError> {
        if self.encryptable
            && looks_sealed(stored)
            && let Ok(v) = serde_json::from_slice::<Value>(stored)
            && crdplane_apiserver::encryption::is_envelope(&v)
        {
            return Err(ApiError::internal(
                crdplane_apiserver::encryption::not_configured(&v),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn file(resources: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("enc.yaml");
        std::fs::write(
            &p,
            format!(
                "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [{resources}]\n  providers:\n  - secretbox: {{keys: [{{name: k, secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=}}]}}\n"
            ),
        )
        .unwrap();
        (d, p)
    }

    #[test]
    fn only_resources_read_through_the_builtin_store_may_be_sealed() {
        let (_d, p) = file("secrets, configmaps, events, leases.coordination.k8s.io");
        assert_eq!(load(&p).unwrap().resources().count(), 4);
        for (r, name) in [
            (
                "roles.rbac.authorization.k8s.io",
                "roles.rbac.authorization.k8s.io",
            ),
            ("serviceaccounts", "serviceaccounts"),
            ("crontabs.stable.example.com", "crontabs.stable.example.com"),
            ("namespaces", "namespaces"),
        ] {
            let (_d, p) = file(r);
            let e = load(&p).unwrap_err();
            assert!(e.starts_with(&format!("{name}: crdplane encrypts")), "{e}");
        }
    }

    #[test]
    fn sealed_objects_without_a_configuration_are_errors() {
        let (_d, p) = file("secrets");
        let c = Arc::new(load(&p).unwrap());
        let on = Sealing::new(Some(&c), "t", ("", "secrets"));
        let off = Sealing::new(None, "t", ("", "secrets"));
        let obj = json!({"kind": "Secret", "metadata": {"name": "s", "namespace": "n"},
            "data": {"k": "dg=="}});
        let sealed = on.seal(obj.clone()).unwrap();
        assert!(on.active() && !off.active());
        assert_eq!(on.open(sealed.clone()).unwrap(), obj);
        let e = off.open(sealed.clone()).unwrap_err();
        assert_eq!(e.code, 500);
        assert!(
            e.message.contains("k8s:enc:secretbox:v1:k"),
            "{}",
            e.message
        );
        let bytes = serde_json::to_vec(&sealed).unwrap();
        assert_eq!(off.check_plain(&bytes).unwrap_err().code, 500);
        off.check_plain(&serde_json::to_vec(&obj).unwrap()).unwrap();
        // Unconfigured resources pass through as stored.
        assert_eq!(off.open(obj.clone()).unwrap(), obj);
    }
}
