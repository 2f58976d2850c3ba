//! Group/resource naming as upstream prints it (`schema.GroupResource.String()`,
//! `schema.GroupKind.String()` in k8s.io/apimachinery/pkg/runtime/schema), and timestamps.

use std::fmt;

/// A group + resource, printed `resource.group` (or `resource` for the core group).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct GroupResource {
    /// API group ("" for the core group).
    pub group: String,
    /// Plural resource name (e.g. `crontabs`).
    pub resource: String,
}

impl GroupResource {
    /// A group/resource from its parts.
    pub fn new(group: impl Into<String>, resource: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            resource: resource.into(),
        }
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// One resource of one tenant: what the storage service keys objects, lists and watches
/// by. The gateway's handlers name resources with it; the gRPC message is built from it in
/// one place (crdplane-proto).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ResourceRef {
    /// The tenant (logical cluster).
    pub tenant: String,
    /// API group ("" for the core group).
    pub group: String,
    /// Plural resource name.
    pub resource: String,
}

impl ResourceRef {
    /// A resource reference from its parts.
    pub fn new(
        tenant: impl Into<String>,
        group: impl Into<String>,
        resource: impl Into<String>,
    ) -> Self {
        Self {
            tenant: tenant.into(),
            group: group.into(),
            resource: resource.into(),
        }
    }
}

/// `Kind.group` (or `Kind` for the core group), as in Invalid messages.
pub fn qualified_kind(kind: &str, group: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

/// The current time as a Kubernetes `metav1.Time` (RFC 3339, second precision, UTC).
pub fn now_timestamp() -> String {
    timestamp(chrono::Utc::now())
}

/// `t` as Kubernetes writes metav1.Time: RFC 3339, whole seconds, `Z`. (chrono's
/// `to_rfc3339_opts`, not a `format` string, which is parsed on every call: a time is
/// written on every tracked write.)
pub fn timestamp(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Splits `group/version` (or `version` for the core group) into (group, version).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.rsplit_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_seconds_utc() {
        use chrono::TimeZone;
        let t = chrono::Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        assert_eq!(timestamp(t), "2026-01-02T03:04:05Z");
        let t = t + chrono::Duration::milliseconds(999);
        assert_eq!(timestamp(t), "2026-01-02T03:04:05Z");
        assert_eq!(now_timestamp().len(), 20);
    }

    #[test]
    fn group_resource_display() {
        assert_eq!(
            GroupResource::new("stable.example.com", "crontabs").to_string(),
            "crontabs.stable.example.com"
        );
        assert_eq!(
            GroupResource::new("", "namespaces").to_string(),
            "namespaces"
        );
        assert_eq!(
            qualified_kind("CronTab", "stable.example.com"),
            "CronTab.stable.example.com"
        );
        assert_eq!(
            split_api_version("stable.example.com/v1"),
            ("stable.example.com", "v1")
        );
        assert_eq!(split_api_version("v1"), ("", "v1"));
    }

    #[test]
    fn timestamp_shape() {
        let t = now_timestamp();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.ends_with('Z'));
    }
}

/// Kubernetes version priority (k8s.io/apimachinery/pkg/version/helpers.go
/// `CompareKubeAwareVersionStrings`), as an ordering where higher priority sorts first:
/// GA before beta before alpha, higher major/minor first; non-kube-like names last,
/// lexicographically.
pub fn compare_kube_versions(a: &str, b: &str) -> std::cmp::Ordering {
    fn parse(v: &str) -> Option<(u64, u8, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        if digits.is_empty() || digits.starts_with('0') {
            return None;
        }
        let major: u64 = digits.parse().ok()?;
        let tail = &rest[digits.len()..];
        if tail.is_empty() {
            return Some((major, 2, 0));
        }
        let (kind, num) = if let Some(n) = tail.strip_prefix("beta") {
            (1, n)
        } else if let Some(n) = tail.strip_prefix("alpha") {
            (0, n)
        } else {
            return None;
        };
        if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit()) || num.starts_with('0') {
            return None;
        }
        Some((major, kind, num.parse().ok()?))
    }
    use std::cmp::Ordering;
    match (parse(a), parse(b)) {
        (Some((ma, ka, na)), Some((mb, kb, nb))) => kb.cmp(&ka).then(mb.cmp(&ma)).then(nb.cmp(&na)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

#[cfg(test)]
mod version_order_tests {
    #[test]
    fn upstream_example_order() {
        let mut v = vec![
            "foo10",
            "v11alpha2",
            "v1",
            "v12alpha1",
            "v3beta1",
            "v10beta3",
            "v11beta2",
            "v2",
            "foo1",
            "v10",
        ];
        v.sort_by(|a, b| super::compare_kube_versions(a, b));
        assert_eq!(
            v,
            [
                "v10",
                "v2",
                "v1",
                "v11beta2",
                "v10beta3",
                "v3beta1",
                "v12alpha1",
                "v11alpha2",
                "foo1",
                "foo10"
            ]
        );
    }
}

/// Prints the line a service binary announces its bound address with (read by the launcher
/// and the test harness, which start services on port 0): `listening on http://ADDR`.
pub fn announce(addr: std::net::SocketAddr) {
    announce_scheme("http", addr);
}

/// [`announce`] with another scheme: `listening on https://ADDR` for a TLS listener.
pub fn announce_scheme(scheme: &str, addr: std::net::SocketAddr) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "listening on {scheme}://{addr}");
    let _ = out.flush();
}

/// Parses an announcement line back into the URL.
pub fn parse_announcement(line: &str) -> Option<&str> {
    line.trim().strip_prefix("listening on ")
}

/// Announces a service's metrics listener on stdout, before [`announce_scheme`]:
/// `metrics on http://ADDR` (`https://` with mutual TLS).
pub fn announce_metrics(scheme: &str, addr: std::net::SocketAddr) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "metrics on {scheme}://{addr}");
    let _ = out.flush();
}

/// Parses an [`announce_metrics`] line back into the URL.
pub fn parse_metrics_announcement(line: &str) -> Option<&str> {
    line.trim().strip_prefix("metrics on ")
}
