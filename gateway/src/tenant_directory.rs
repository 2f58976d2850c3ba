//! Which tenants exist, as this gateway last saw them: a cache of the phase of each Tenant
//! (`crdplane.io/v1alpha1`, see `stores/tenants.rs`), asked on every request by the
//! tenant-lifecycle layer of the edge (`filters/tenant_lifecycle.rs`) through
//! `tenants::phase`.
//!
//! Kept fresh like the gateway's other caches (`Ctx::spawn_cache_followers`): the storage
//! change stream of Tenants drops an entry whenever its Tenant changes, whichever replica
//! changed it; while the stream is down nothing is cached, so every request reads its
//! Tenant, and an epoch keeps a read that raced with a change from being stored. Only
//! existing Tenants are cached: an unknown name costs one storage read per request (and
//! writes nothing).
//!
//! The map is hashbrown's with its default hasher (foldhash), not std's SipHash: it is
//! looked up on every request (twice with metrics on), and callgrind showed SipHash's cost
//! there. Its keys are tenants that exist, so no client chooses them.

use hashbrown::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The lifecycle phase of an existing tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Serving requests.
    Active,
    /// Deleted: its objects are being purged; it serves no request.
    Terminating,
}

/// The cache (see the module docs).
#[derive(Debug, Default)]
pub struct Directory {
    phases: RwLock<HashMap<String, Phase>>,
    epoch: AtomicU64,
    following: AtomicBool,
}

impl Directory {
    /// The cached phase of `tenant`.
    pub fn cached(&self, tenant: &str) -> Option<Phase> {
        self.phases.read().expect("lock").get(tenant).copied()
    }

    /// The epoch to pass to [`Self::remember`] for a read that starts now.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Caches what a read that started at `epoch` found, unless a change came since or
    /// changes are not followed.
    pub fn remember(&self, tenant: &str, phase: Phase, epoch: u64) {
        let mut m = self.phases.write().expect("lock");
        if self.following.load(Ordering::SeqCst) && self.epoch.load(Ordering::SeqCst) == epoch {
            m.insert(tenant.to_string(), phase);
        }
    }

    /// Drops what is cached of `tenant` (its Tenant changed).
    pub fn forget(&self, tenant: &str) {
        let mut m = self.phases.write().expect("lock");
        self.epoch.fetch_add(1, Ordering::SeqCst);
        m.remove(tenant);
    }

    /// The change stream of Tenants connected (`true`) or broke (`false`): either way
    /// nothing cached before can be trusted.
    pub fn following(&self, up: bool) {
        let mut m = self.phases.write().expect("lock");
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.following.store(up, Ordering::SeqCst);
        m.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caches_only_while_following_and_unchanged() {
        let d = Directory::default();
        let e = d.epoch();
        d.remember("a", Phase::Active, e);
        assert_eq!(d.cached("a"), None, "not following yet");
        d.following(true);
        let e = d.epoch();
        d.remember("a", Phase::Active, e);
        assert_eq!(d.cached("a"), Some(Phase::Active));
        // A read that raced with a change is not stored.
        let e = d.epoch();
        d.forget("b");
        d.remember("b", Phase::Active, e);
        assert_eq!(d.cached("b"), None);
        d.forget("a");
        assert_eq!(d.cached("a"), None);
        d.remember("a", Phase::Terminating, d.epoch());
        assert_eq!(d.cached("a"), Some(Phase::Terminating));
        d.following(false);
        assert_eq!(d.cached("a"), None);
    }
}
