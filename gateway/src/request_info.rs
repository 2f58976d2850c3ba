//! `RequestInfo`: what a Kubernetes API path and method address — pure, no IO.
//!
//! Follows k8s.io/apiserver/pkg/endpoints/request/requestinfo.go (`NewRequestInfo`), plus
//! the tenant prefix of DESIGN.md: `/clusters/<tenant>/…` addresses that tenant, plain paths
//! the default tenant. First step of the gateway's request path, before any service call.

/// What a request addresses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestInfo {
    /// Tenant from the path prefix; the default tenant when there is none (the
    /// configured one, until the authentication layer points the request at its
    /// identity's own: [`identity_tenant`]).
    pub tenant: String,
    /// Whether the path named the tenant (`/clusters/<tenant>/…`).
    pub tenant_from_path: bool,
    /// Path with the tenant prefix removed, e.g. `/apis/stable.example.com/v1/...`.
    pub path: String,
    /// True for `/api/...` and `/apis/...` paths that name a resource (upstream
    /// `RequestInfo.IsResourceRequest`), false for discovery and other non-resource paths.
    pub is_resource_request: bool,
    /// "api" or "apis".
    pub api_prefix: String,
    /// API group ("" = the core group).
    pub api_group: String,
    /// API version, e.g. `v1`.
    pub api_version: String,
    /// Namespace of a namespaced request ("" = cluster scope or all namespaces).
    pub namespace: String,
    /// Plural resource name, e.g. `crontabs`.
    pub resource: String,
    /// Subresource, e.g. `status` or `scale` ("" = the main resource).
    pub subresource: String,
    /// Object name ("" for collection requests).
    pub name: String,
    /// get, list, watch, create, update, patch, delete, deletecollection (resource requests),
    /// or the lowercase HTTP method for non-resource requests.
    pub verb: String,
}

/// Longest path segment / tenant we accept (names are at most 253 bytes upstream).
pub const MAX_SEGMENT: usize = 253;

/// Tenant names are DNS-1123 labels.
pub fn valid_tenant(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 63
        && t.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !t.starts_with('-')
        && !t.ends_with('-')
}

/// Groups named `crdplane:tenant:<tenant>` give an identity its default tenant: the
/// tenant of its requests on plain paths (from a client certificate's Organization, a
/// token file's groups, an OIDC groups claim).
pub const TENANT_GROUP_PREFIX: &str = "crdplane:tenant:";

/// The default tenant of an identity with `groups`: the first valid tenant named by a
/// [`TENANT_GROUP_PREFIX`] group.
pub fn identity_tenant(groups: &[String]) -> Option<&str> {
    groups
        .iter()
        .filter_map(|g| g.strip_prefix(TENANT_GROUP_PREFIX))
        .find(|t| valid_tenant(t))
}

/// Parses `method` + `path` (+ whether the query's `watch` parameter is true, by
/// `crate::http::query_bool`). Returns `Err` with a message for paths that can never be valid (bad tenant).
pub fn parse(
    method: &str,
    path: &str,
    query_watch: bool,
    default_tenant: &str,
) -> Result<RequestInfo, String> {
    let mut info = RequestInfo {
        tenant: default_tenant.to_string(),
        ..Default::default()
    };
    let mut rest = path;
    if let Some(r) = path.strip_prefix("/clusters/") {
        let (t, after) = r.split_once('/').unwrap_or((r, ""));
        if !valid_tenant(t) {
            return Err(format!("invalid tenant name {t:?}"));
        }
        info.tenant = t.to_string();
        info.tenant_from_path = true;
        rest = if after.is_empty() {
            "/"
        } else {
            &path["/clusters/".len() + t.len()..]
        };
    }
    info.path = rest.to_string();
    let lower_method = method.to_ascii_lowercase();
    info.verb = lower_method.clone();

    let parts: Vec<&str> = rest
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    if parts.is_empty() || (parts[0] != "api" && parts[0] != "apis") {
        // The process's metrics cover every tenant: they belong to the admin scope, whose
        // RBAC decides who may read them (upstream: `get` on the non-resource URL).
        if parts == ["metrics"] {
            info.tenant = crdplane_core::tenancy::ADMIN_SCOPE.to_string();
            info.tenant_from_path = true;
        }
        return Ok(info);
    }
    if parts.iter().any(|p| p.len() > MAX_SEGMENT) {
        return Ok(info);
    }
    info.api_prefix = parts[0].to_string();
    let mut cur = &parts[1..];
    if info.api_prefix == "apis" {
        if cur.is_empty() {
            return Ok(info);
        }
        info.api_group = cur[0].to_string();
        cur = &cur[1..];
    }
    if cur.is_empty() {
        return Ok(info);
    }
    info.api_version = cur[0].to_string();
    cur = &cur[1..];
    if cur.is_empty() {
        return Ok(info);
    }
    info.is_resource_request = true;

    // The legacy /watch/ prefix.
    let mut watch_prefix = false;
    if cur[0] == "watch" {
        watch_prefix = true;
        cur = &cur[1..];
    }
    // Upstream: after /namespaces/{ns}, another segment that is not a namespace
    // subresource (status, finalize) starts the namespaced resource path.
    if cur.first() == Some(&"namespaces") && cur.len() > 1 {
        info.namespace = cur[1].to_string();
        if cur.len() > 2 && !matches!(cur[2], "status" | "finalize") {
            cur = &cur[2..];
        }
    }
    match cur.len() {
        0 => {}
        1 => info.resource = cur[0].to_string(),
        2 => {
            info.resource = cur[0].to_string();
            info.name = cur[1].to_string();
        }
        _ => {
            info.resource = cur[0].to_string();
            info.name = cur[1].to_string();
            info.subresource = cur[2..].join("/");
        }
    }
    // A namespace object addressed as /api/v1/namespaces/{name}: namespace field is not set.
    if info.resource == "namespaces" && info.api_group.is_empty() {
        info.namespace.clear();
    }
    if info.resource.is_empty() {
        info.is_resource_request = false;
        return Ok(info);
    }

    info.verb = match lower_method.as_str() {
        "post" => "create",
        "get" | "head" => "get",
        "put" => "update",
        "patch" => "patch",
        "delete" => "delete",
        other => other,
    }
    .to_string();
    if watch_prefix {
        info.verb = "watch".into();
    } else if info.verb == "get" && info.name.is_empty() {
        info.verb = if query_watch { "watch" } else { "list" }.into();
    } else if info.verb == "get" && query_watch {
        // Watch on a single object (GET /…/name?watch=true) is a watch with a name filter.
        info.verb = "watch".into();
    }
    if info.verb == "delete" && info.name.is_empty() {
        info.verb = "deletecollection".into();
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(m: &str, path: &str, w: bool) -> RequestInfo {
        parse(m, path, w, "default").unwrap()
    }

    #[test]
    fn namespaced_custom_resources() {
        let i = p(
            "GET",
            "/apis/stable.example.com/v1/namespaces/default/crontabs/x",
            false,
        );
        assert_eq!(
            (
                i.api_group.as_str(),
                i.api_version.as_str(),
                i.namespace.as_str(),
                i.resource.as_str(),
                i.name.as_str(),
                i.verb.as_str()
            ),
            (
                "stable.example.com",
                "v1",
                "default",
                "crontabs",
                "x",
                "get"
            )
        );
        assert_eq!(
            p(
                "GET",
                "/apis/stable.example.com/v1/namespaces/default/crontabs",
                false
            )
            .verb,
            "list"
        );
        assert_eq!(
            p(
                "GET",
                "/apis/stable.example.com/v1/namespaces/default/crontabs",
                true
            )
            .verb,
            "watch"
        );
        assert_eq!(
            p("GET", "/apis/stable.example.com/v1/crontabs", false).verb,
            "list"
        );
        assert_eq!(
            p(
                "POST",
                "/apis/stable.example.com/v1/namespaces/d/crontabs",
                false
            )
            .verb,
            "create"
        );
        assert_eq!(
            p(
                "DELETE",
                "/apis/stable.example.com/v1/namespaces/d/crontabs",
                false
            )
            .verb,
            "deletecollection"
        );
        let s = p(
            "PATCH",
            "/apis/stable.example.com/v1/namespaces/d/crontabs/x/status",
            false,
        );
        assert_eq!(
            (s.subresource.as_str(), s.verb.as_str()),
            ("status", "patch")
        );
    }

    #[test]
    fn legacy_watch_and_namespaces() {
        let w = p(
            "GET",
            "/apis/stable.example.com/v1/watch/namespaces/d/crontabs/x",
            false,
        );
        assert_eq!(
            (w.verb.as_str(), w.name.as_str(), w.namespace.as_str()),
            ("watch", "x", "d")
        );
        let n = p("GET", "/api/v1/namespaces/kube-system", false);
        assert_eq!(
            (
                n.resource.as_str(),
                n.name.as_str(),
                n.namespace.as_str(),
                n.verb.as_str()
            ),
            ("namespaces", "kube-system", "", "get")
        );
        assert_eq!(p("GET", "/api/v1/namespaces", false).verb, "list");
        let f = p("PUT", "/api/v1/namespaces/x/finalize", false);
        assert_eq!(
            (f.resource.as_str(), f.name.as_str(), f.subresource.as_str()),
            ("namespaces", "x", "finalize")
        );
    }

    #[test]
    fn identity_tenants() {
        let g = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(identity_tenant(&g(&["system:authenticated"])), None);
        assert_eq!(
            identity_tenant(&g(&[
                "crdplane:tenant:Bad",
                "crdplane:tenant:acme",
                "crdplane:tenant:b"
            ])),
            Some("acme")
        );
        assert!(!p("GET", "/api/v1/pods", false).tenant_from_path);
        assert!(p("GET", "/clusters/acme/api/v1/pods", false).tenant_from_path);
    }

    #[test]
    fn non_resource_and_tenants() {
        let d = p("GET", "/apis/stable.example.com/v1", false);
        assert!(!d.is_resource_request);
        assert_eq!(d.api_version, "v1");
        assert!(!p("GET", "/openapi/v2", false).is_resource_request);
        let t = p("GET", "/clusters/acme/apis/g.io/v1/widgets", false);
        assert_eq!(
            (t.tenant.as_str(), t.path.as_str(), t.resource.as_str()),
            ("acme", "/apis/g.io/v1/widgets", "widgets")
        );
        assert_eq!(p("GET", "/clusters/acme", false).path, "/");
        assert!(parse("GET", "/clusters/Bad_Tenant/api", false, "default").is_err());
        assert_eq!(p("GET", "/api/v1/pods", false).tenant, "default");
    }
}
