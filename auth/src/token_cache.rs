//! The cache of verified bearer JWTs (service-account and OIDC tokens).
//!
//! Where it sits: inside [`Authenticators::authenticate_full`], between the token file (a map
//! lookup, never cached) and the JWT authenticators, whose signature check (ECDSA or RSA) is
//! by far the most expensive step of a request that carries such a token. A token accepted
//! once is accepted again from here for [`SUCCESS_TTL`], without verifying its signature
//! again; refusals are not cached (upstream's default failure TTL is 0).
//! `cargo bench -p crdplane-auth --bench authenticate` measures a service-account token at
//! about 320 µs per request verified and 5 µs from the cache (most of it the SHA-256 of the
//! ~700-byte token).
//!
//! Upstream: kube-apiserver wraps its union of token authenticators in
//! `staging/src/k8s.io/apiserver/pkg/authentication/token/cache/cached_token_authenticator.go`,
//! with defaults of 10 s for successes and 0 for failures
//! (`pkg/kubeapiserver/options/authentication.go`).
//!
//! Differences:
//! - Keys are the tokens' SHA-256 digests, which the chain computes once per request for the
//!   token file's lookup anyway (`token_file.rs`), where upstream keys by an HMAC under a
//!   random key. Either way the cache holds no usable token, and how long a lookup takes says
//!   nothing about how much of a guessed token is right; a bearer JWT carries far too much
//!   entropy for a digest to be reversed by guessing.
//! - Stricter: an entry never outlives the token's own `exp` claim (the verifiers allow 60 s
//!   of clock skew; a token in that window is verified on every request), and the cache is
//!   bounded ([`MAX_ENTRIES`]; when full, expired entries go first, then everything).
//! - Stricter: entries carry the generation of the JWT issuers' key sets
//!   ([`crate::oidc::Oidc::key_generation`]); when the gateway replaces a key set (a
//!   rotation seen by its fetcher, or the hourly refresh), every token is verified again, so
//!   tokens of a withdrawn key stop working at once instead of up to the TTL later.
//!
//! Revocation stays prompt: a service-account token's account (and bound Secret) is checked
//! by the gateway on every request after authentication, with its own cache that every write
//! of the account invalidates; the cache here only saves the signature and claim checks.
//!
//! [`Authenticators::authenticate_full`]: crate::chain::Authenticators::authenticate_full

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;

use crate::service_account::ServiceAccountToken;
use crate::token_file::TokenDigest;
use crate::user::UserInfo;

/// How long an accepted token is accepted from the cache (upstream's default success TTL).
pub const SUCCESS_TTL: Duration = Duration::from_secs(10);

/// Most tokens the cache holds.
pub const MAX_ENTRIES: usize = 4096;

/// What a verified token authenticated as.
#[derive(Debug, Clone)]
pub(crate) struct Verified {
    pub(crate) user: UserInfo,
    pub(crate) service_account: Option<ServiceAccountToken>,
}

struct Entry {
    until: Instant,
    generation: u64,
    verified: Verified,
}

/// Verified tokens, keyed by their SHA-256 digest (see the module documentation). Cheap to
/// clone; clones share the entries.
#[derive(Clone)]
pub struct TokenCache {
    inner: Arc<Inner>,
}

struct Inner {
    ttl: Duration,
    entries: Mutex<HashMap<TokenDigest, Entry>>,
}

impl std::fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The digests do not belong in logs.
        f.debug_struct("TokenCache")
            .field("ttl", &self.inner.ttl)
            .finish_non_exhaustive()
    }
}

impl Default for TokenCache {
    fn default() -> Self {
        Self::new(SUCCESS_TTL)
    }
}

impl TokenCache {
    /// An empty cache keeping accepted tokens for `ttl` (zero: nothing is kept).
    pub fn new(ttl: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                ttl,
                entries: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// How many tokens the cache holds (expired ones included until they are dropped).
    pub fn len(&self) -> usize {
        self.inner.entries.lock().expect("token cache lock").len()
    }

    /// Whether the cache holds no token.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cached outcome of the token of digest `d`, if it was accepted within the TTL (and
    /// its `exp` has not passed) under the issuers' key-set `generation`.
    pub(crate) fn get(&self, d: &TokenDigest, generation: u64) -> Option<Verified> {
        if self.inner.ttl.is_zero() {
            return None;
        }
        let d = *d;
        let now = Instant::now();
        let mut entries = self.inner.entries.lock().expect("token cache lock");
        match entries.get(&d) {
            Some(e) if e.until > now && e.generation == generation => Some(e.verified.clone()),
            Some(_) => {
                entries.remove(&d);
                None
            }
            None => None,
        }
    }

    /// Keeps the outcome of the accepted `token` (of digest `d`, verified under the key-set
    /// `generation`) for the TTL, but not past its `exp` claim.
    pub(crate) fn insert(
        &self,
        d: TokenDigest,
        generation: u64,
        token: &[u8],
        verified: &Verified,
    ) {
        if self.inner.ttl.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut until = now + self.inner.ttl;
        if let Some(exp) = expiry(token) {
            let left = exp
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO);
            until = until.min(now + left);
        }
        if until <= now {
            return;
        }
        let mut entries = self.inner.entries.lock().expect("token cache lock");
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(&d) {
            entries.retain(|_, e| e.until > now);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(
            d,
            Entry {
                until,
                generation,
                verified: verified.clone(),
            },
        );
    }
}

/// The `exp` claim of a JWT (already verified by the caller), as a time.
fn expiry(token: &[u8]) -> Option<SystemTime> {
    let payload = token.split(|&b| b == b'.').nth(1)?;
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&json).ok()?;
    let exp = v.get("exp")?.as_f64()?;
    if !(exp.is_finite() && exp >= 0.0) {
        return None;
    }
    Some(UNIX_EPOCH + Duration::from_secs_f64(exp.min(1e12)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token_file::digest;

    fn jwt(exp: i64) -> Vec<u8> {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!(
            "{}.{}.sig",
            b64.encode(br#"{"alg":"ES256"}"#),
            b64.encode(format!(r#"{{"exp":{exp},"sub":"x"}}"#))
        )
        .into_bytes()
    }

    fn now() -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    }

    fn verified(name: &str) -> Verified {
        Verified {
            user: UserInfo {
                name: name.into(),
                ..Default::default()
            },
            service_account: None,
        }
    }

    #[test]
    fn accepted_tokens_come_back_until_the_ttl() {
        let c = TokenCache::new(Duration::from_millis(200));
        let t = jwt(now() + 3600);
        assert!(c.get(&digest(&t), 0).is_none());
        c.insert(digest(&t), 0, &t, &verified("alice"));
        assert_eq!(c.get(&digest(&t), 0).unwrap().user.name, "alice");
        // Another token (one byte differs) is not the cached one.
        let mut other = t.clone();
        *other.last_mut().unwrap() = b'h';
        assert!(c.get(&digest(&other), 0).is_none());
        std::thread::sleep(Duration::from_millis(250));
        assert!(c.get(&digest(&t), 0).is_none(), "kept past the TTL");
        assert!(c.is_empty(), "an expired entry is dropped when met");
    }

    #[test]
    fn an_entry_never_outlives_the_tokens_exp() {
        let c = TokenCache::new(Duration::from_secs(10));
        // Expired (a verifier's clock-skew leeway let it through): never cached.
        let t = jwt(now() - 5);
        c.insert(digest(&t), 0, &t, &verified("late"));
        assert!(c.get(&digest(&t), 0).is_none());
        // One that expires in about a second is dropped then, not after the 10 s TTL.
        let t = jwt(now() + 1);
        c.insert(digest(&t), 0, &t, &verified("soon"));
        assert!(c.get(&digest(&t), 0).is_some());
        std::thread::sleep(Duration::from_millis(2100));
        assert!(c.get(&digest(&t), 0).is_none(), "kept past exp");
    }

    #[test]
    fn a_new_key_set_generation_drops_what_was_verified() {
        let c = TokenCache::new(Duration::from_secs(10));
        let t = jwt(now() + 3600);
        c.insert(digest(&t), 4, &t, &verified("carol"));
        assert!(c.get(&digest(&t), 4).is_some());
        assert!(
            c.get(&digest(&t), 5).is_none(),
            "kept across a key rotation"
        );
        assert!(
            c.get(&digest(&t), 4).is_none(),
            "a stale entry is dropped when met"
        );
    }

    #[test]
    fn zero_ttl_keeps_nothing() {
        let t = jwt(now() + 60);
        let off = TokenCache::new(Duration::ZERO);
        off.insert(digest(&t), 0, &t, &verified("x"));
        assert!(off.get(&digest(&t), 0).is_none());
        assert!(off.is_empty());
    }

    #[test]
    fn the_cache_is_bounded() {
        let c = TokenCache::new(Duration::from_secs(60));
        let exp = now() + 3600;
        for i in 0..MAX_ENTRIES + 10 {
            let t = [jwt(exp), format!("{i}").into_bytes()].concat();
            c.insert(digest(&t), 0, &t, &verified("u"));
            assert!(c.len() <= MAX_ENTRIES);
        }
    }
}
