//! What deciding who a request is costs, per request, for the bearer credentials a client
//! sends on every request:
//! - `token-file`: a `--token-auth-file` token (SHA-256 of the token, a map lookup);
//! - `service-account/cached`: a service-account JWT accepted within the token cache's TTL
//!   (HMAC-SHA256 of the token, a map lookup: `crdplane_auth::token_cache`);
//! - `service-account/verified`: the same token with the cache off (ES256 signature and
//!   claim checks on every request, as before the cache).
//!
//! Run: `cargo bench -p crdplane-auth --bench authenticate`.

use crdplane_auth::chain::Authenticators;
use crdplane_auth::service_account::{DEFAULT_ISSUER, Signer, Verifier};
use crdplane_auth::token_cache::{SUCCESS_TTL, TokenCache};
use crdplane_auth::token_file::TokenFile;
use criterion::Criterion;
use std::hint::black_box;
use std::time::Duration;

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let key = rcgen::KeyPair::generate().unwrap();
    let aud = vec![DEFAULT_ISSUER.to_string()];
    let signer = Signer::from_pem(&key.serialize_pem(), DEFAULT_ISSUER).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let (sa, _) = signer
        .issue("acme", "ns1", "bot", "uid-1", &aud, now, 3600, "j1")
        .unwrap();
    let (tokens, _) =
        TokenFile::parse("load-0123456789abcdef0123456789abcdef,load,1000\n", "t").unwrap();
    let chain = |ttl: Duration| Authenticators {
        tokens: Some(tokens.clone()),
        service_accounts: Some(Verifier::from_pems(&[key.public_key_pem()], &aud, &aud).unwrap()),
        token_cache: TokenCache::new(ttl),
        ..Authenticators::default()
    };
    let (cached, uncached) = (chain(SUCCESS_TTL), chain(Duration::ZERO));
    let sa_header = format!("Bearer {sa}");
    let mut g = c.benchmark_group("authenticate");
    g.bench_function("token-file", |b| {
        b.iter(|| {
            cached
                .authenticate_full(
                    Some(black_box(b"Bearer load-0123456789abcdef0123456789abcdef")),
                    None,
                )
                .unwrap()
        })
    });
    g.bench_function("service-account/cached", |b| {
        b.iter(|| {
            cached
                .authenticate_full(Some(black_box(sa_header.as_bytes())), None)
                .unwrap()
        })
    });
    g.bench_function("service-account/verified", |b| {
        b.iter(|| {
            uncached
                .authenticate_full(Some(black_box(sa_header.as_bytes())), None)
                .unwrap()
        })
    });
    g.finish();
    c.final_summary();
}
