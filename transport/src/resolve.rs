//! `dns:///host:port` endpoints: a service's replicas found by resolving one name, again
//! every few seconds, as gRPC's `dns` resolver and Envoy's `STRICT_DNS` clusters do.
//!
//! Where it sits: beside [`crate::balance`]. A channel configured with `dns:///name:port`
//! runs one task per such target that resolves `name` (the system resolver, so
//! `/etc/hosts` and the cluster DNS both answer) every [`DEFAULT_REFRESH`]; each address it
//! returns becomes one endpoint of the channel's pool (its own HTTP/2 connection and
//! health watch), and an address that stops being returned leaves the pool (its calls in
//! flight finish). On Kubernetes the name is a headless Service's, which resolves to the
//! ready pods' addresses: calls spread per request over every replica, health-aware,
//! instead of riding one long-lived HTTP/2 connection through a ClusterIP to one pod.
//!
//! A failed or empty resolution keeps the last known addresses (gRPC keeps its last good
//! result too); until a first resolution succeeds a call fails with UNAVAILABLE. With
//! mutual TLS the endpoints speak `https` and check that the server's certificate holds
//! `name`, not the address they dial.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::future::BoxFuture;

use crate::client::Endpoint;

/// How often a `dns:///` target is resolved again (Envoy's default `dns_refresh_rate`).
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(5);

/// The URL prefix of a resolved target (gRPC's name syntax, without an authority).
pub const PREFIX: &str = "dns:///";

/// One lookup: every address of a host name and port now.
pub type Lookup = BoxFuture<'static, std::io::Result<Vec<SocketAddr>>>;

/// Looks a host name and port up.
#[derive(Clone)]
pub struct Resolver(Arc<dyn Fn(String, u16) -> Lookup + Send + Sync>);

impl Resolver {
    /// The system resolver (`getaddrinfo`, through Tokio's blocking pool).
    pub fn system() -> Resolver {
        Resolver(Arc::new(|host, port| {
            Box::pin(async move {
                Ok(tokio::net::lookup_host((host.as_str(), port))
                    .await?
                    .collect())
            })
        }))
    }

    /// A resolver of one's own (tests: addresses that change on cue).
    pub fn new(f: impl Fn(String, u16) -> Lookup + Send + Sync + 'static) -> Resolver {
        Resolver(Arc::new(f))
    }

    async fn lookup(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        (self.0)(host.to_string(), port).await
    }
}

impl Default for Resolver {
    fn default() -> Self {
        Self::system()
    }
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Resolver")
    }
}

/// A `dns:///host:port` target: the endpoint every resolved address is dialled as (the
/// URL, `https` when mutual TLS is configured) and the name to resolve.
pub(crate) struct Target {
    pub(crate) template: Endpoint,
    pub(crate) host: String,
    pub(crate) port: u16,
}

/// Parses `dns:///host:port`; `None` when `url` is not a `dns:` target.
pub(crate) fn parse(url: &str, tls: Option<&crate::mtls::Mtls>) -> Option<Result<Target, String>> {
    let rest = url.strip_prefix("dns:")?;
    let Some(name) = rest.strip_prefix("///") else {
        return Some(Err(format!(
            "{url:?}: write a resolved target as dns:///host:port (a DNS server authority is not supported)"
        )));
    };
    let authority: http::uri::Authority = match name.parse() {
        Ok(a) => a,
        Err(e) => return Some(Err(format!("{url:?}: {e}"))),
    };
    let Some(port) = authority.port_u16() else {
        return Some(Err(format!(
            "{url:?}: the port is missing (dns:///host:port)"
        )));
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let template = match Endpoint::new(&format!("{scheme}://{authority}"), tls) {
        Ok(t) => t,
        Err(e) => return Some(Err(e.to_string())),
    };
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    Some(Ok(Target {
        template,
        host,
        port,
    }))
}

/// What a pool offers the resolver task.
pub(crate) trait Membership: Send + Sync + 'static {
    /// Adds `endpoint`; returns its key.
    fn add(&self, endpoint: Endpoint) -> usize;
    /// Takes the endpoint with `key` out for good.
    fn remove(&self, key: usize);
}

/// Resolves `target` every `refresh` for as long as `pool` lives, keeping the pool's
/// endpoints for it equal to the addresses the name has.
pub(crate) async fn follow<M: Membership>(
    pool: Weak<M>,
    target: Target,
    resolver: Resolver,
    refresh: Duration,
) {
    let mut current: BTreeMap<SocketAddr, usize> = BTreeMap::new();
    loop {
        match resolver.lookup(&target.host, target.port).await {
            Ok(found) if !found.is_empty() => {
                let Some(pool) = pool.upgrade() else { return };
                let mut changed = false;
                for &addr in &found {
                    if let std::collections::btree_map::Entry::Vacant(v) = current.entry(addr) {
                        v.insert(pool.add(target.template.at(addr)));
                        changed = true;
                    }
                }
                current.retain(|addr, key| {
                    let keep = found.contains(addr);
                    if !keep {
                        pool.remove(*key);
                        changed = true;
                    }
                    keep
                });
                if changed {
                    let addrs: Vec<String> = current.keys().map(|a| a.to_string()).collect();
                    tracing::info!(name = %target.host, addresses = ?addrs, "service endpoints resolved");
                }
            }
            Ok(_) => {
                tracing::warn!(name = %target.host, "the name resolved to no address; keeping the last known")
            }
            Err(e) => {
                tracing::warn!(name = %target.host, error = %e, "cannot resolve; keeping the last known addresses")
            }
        }
        if pool.strong_count() == 0 {
            return;
        }
        tokio::time::sleep(refresh).await;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn targets() {
        let ok = |u: &str| super::parse(u, None).unwrap().unwrap();
        let t = ok("dns:///crdplane-storage:7001");
        assert_eq!((t.host.as_str(), t.port), ("crdplane-storage", 7001));
        assert_eq!(t.template.authority(), "crdplane-storage:7001");
        let t = ok("dns:///[::1]:9");
        assert_eq!((t.host.as_str(), t.port), ("::1", 9));
        assert!(super::parse("http://a:1", None).is_none());
        for bad in ["dns:///a", "dns://8.8.8.8/a:1", "dns:a:1", "dns:///"] {
            assert!(super::parse(bad, None).unwrap().is_err(), "{bad}");
        }
    }
}
