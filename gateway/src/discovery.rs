//! Non-resource endpoints: health (`/healthz`, `/livez`, `/readyz`, k8s.io/apiserver
//! pkg/server/healthz), `/version`, legacy and aggregated discovery (`/api`, `/api/v1`,
//! `/apis`, `/apis/<g>`, `/apis/<g>/<v>`), OpenAPI v2 (JSON and gnostic protobuf) and v3.
//! Everything but the core group comes from the registry's per-tenant documents, one source
//! of truth for legacy and aggregated discovery (the built-in groups `coordination.k8s.io`,
//! `events.k8s.io` and `rbac.authorization.k8s.io` included). The core group's built-in types (configmaps, events,
//! secrets, serviceaccounts) are listed from `crdplane_core::builtin::BUILTIN`, with the
//! entries `BuiltinResource::discovery_resource`/`aggregated_resource` build for the
//! registry too.

use crate::context::{Ctx, Req};
use crate::http::{Body, full, json_response, parse_accept, text_response};
use crdplane_core::ApiError;
use crdplane_core::discovery::{
    APIGroupDiscovery, APIGroupDiscoveryList, APIResource, APIResourceDiscovery, APIResourceList,
    APISubresourceDiscovery, APIVersionDiscovery, GroupMeta, GroupVersionKind, non_empty,
    resource_list, scope, strings,
};
use http::{HeaderValue, Response, StatusCode, header};
use serde_json::{Value, json};

/// Content type of aggregated discovery v2 (`APIGroupDiscoveryList`).
pub const AGGREGATED_CT: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
const PROTO_V2: [&str; 2] = [
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
];

/// The Kubernetes version this server reports (its API behaviour follows this release).
pub fn version_info() -> Value {
    json!({
        "major": "1", "minor": "34", "gitVersion": "v1.34.0",
        "gitCommit": "crdplane", "gitTreeState": "clean", "buildDate": "2026-11-01T00:00:00Z",
        "goVersion": "go1.24.0", "compiler": "gc", "platform": "linux/amd64"
    })
}

fn wants_aggregated(req: &Req) -> bool {
    parse_accept(req.header(http::header::ACCEPT))
        .into_iter()
        .any(|r| {
            r.mime == "application/json"
                && r.param("g") == Some("apidiscovery.k8s.io")
                && r.param("v") == Some("v2")
                && r.param("as") == Some("APIGroupDiscoveryList")
        })
}

fn aggregated_response(body: impl Into<bytes::Bytes>) -> Response<Body> {
    let mut r = json_response(StatusCode::OK, body);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(AGGREGATED_CT),
    );
    r.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    r
}

/// Served resources of the core group that come from the built-in table
/// (`crdplane_core::builtin::BUILTIN`): configmaps, events, secrets, serviceaccounts.
fn core_builtins() -> impl Iterator<Item = &'static crdplane_core::builtin::BuiltinResource> {
    crdplane_core::builtin::BUILTIN
        .iter()
        .filter(|b| b.group.is_empty() && b.version == "v1")
}

/// A core `v1` resource that is not in the built-in table: namespaces and its
/// subresources, and the read-only, always empty resources of category `all`
/// (see `api::EMPTY_CORE`).
struct Core {
    name: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    verbs: &'static [&'static str],
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    storage_version_hash: Option<&'static str>,
}

const NAMESPACE_VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];
const READ_ONLY: &[&str] = &["get", "list"];

const CORE: [Core; 6] = [
    Core {
        name: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        verbs: NAMESPACE_VERBS,
        short_names: &["ns"],
        categories: &[],
        storage_version_hash: Some("Q3oi5N2YM8M="),
    },
    Core {
        name: "namespaces/finalize",
        singular: "",
        kind: "Namespace",
        namespaced: false,
        verbs: &["update"],
        short_names: &[],
        categories: &[],
        storage_version_hash: None,
    },
    Core {
        name: "namespaces/status",
        singular: "",
        kind: "Namespace",
        namespaced: false,
        verbs: &["get", "patch", "update"],
        short_names: &[],
        categories: &[],
        storage_version_hash: None,
    },
    Core {
        name: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        verbs: READ_ONLY,
        short_names: &["po"],
        categories: &["all"],
        storage_version_hash: None,
    },
    Core {
        name: "replicationcontrollers",
        singular: "replicationcontroller",
        kind: "ReplicationController",
        namespaced: true,
        verbs: READ_ONLY,
        short_names: &["rc"],
        categories: &["all"],
        storage_version_hash: None,
    },
    Core {
        name: "services",
        singular: "service",
        kind: "Service",
        namespaced: true,
        verbs: READ_ONLY,
        short_names: &["svc"],
        categories: &["all"],
        storage_version_hash: None,
    },
];

/// `/api/v1` of this server: namespaces, the built-in types of the core group, and the
/// read-only, always empty core resources of category `all`, in name order (k8s.io/apiserver
/// `pkg/endpoints/installer.go` registers paths sorted). Upstream's legacy `/api/v1` list
/// has no `apiVersion` (unlike `/apis/<g>/<v>`), so neither has this one.
///
/// With `token_request` (a service-account signing key is configured) the list has
/// `serviceaccounts/token`, the TokenRequest subresource (`create`, kind `TokenRequest` of
/// `authentication.k8s.io/v1`), as kube-apiserver registers it only with a signer
/// (pkg/registry/core/rest/storage_core.go).
pub fn core_v1_resources(token_request: bool) -> Value {
    let mut v = serde_json::to_value(core_v1_list(token_request)).expect("json");
    if let Some(m) = v.as_object_mut() {
        m.remove("apiVersion");
    }
    v
}

/// The TokenRequest subresource's group, version and kind.
const TOKEN_REQUEST: (&str, &str, &str) = ("authentication.k8s.io", "v1", "TokenRequest");

fn core_v1_list(token_request: bool) -> APIResourceList {
    let mut resources: Vec<APIResource> = CORE
        .iter()
        .map(|c| APIResource {
            name: c.name.into(),
            singular_name: c.singular.into(),
            namespaced: c.namespaced,
            kind: c.kind.into(),
            verbs: strings(c.verbs),
            short_names: non_empty(c.short_names),
            categories: non_empty(c.categories),
            storage_version_hash: c.storage_version_hash.map(Into::into),
            ..Default::default()
        })
        .collect();
    resources.extend(core_builtins().map(|b| b.discovery_resource()));
    if token_request {
        resources.push(APIResource {
            name: "serviceaccounts/token".into(),
            singular_name: String::new(),
            namespaced: true,
            group: Some(TOKEN_REQUEST.0.into()),
            version: Some(TOKEN_REQUEST.1.into()),
            kind: TOKEN_REQUEST.2.into(),
            verbs: strings(&["create"]),
            ..Default::default()
        });
    }
    resources.sort_by(|a, b| a.name.cmp(&b.name));
    resource_list("v1", resources)
}

/// The core group in aggregated discovery: the same resources, subresources folded into
/// their resource.
fn core_aggregated(token_request: bool) -> APIGroupDiscoveryList {
    let kind = |k: &str| Some(GroupVersionKind::new("", "v1", k));
    let mut resources: Vec<APIResourceDiscovery> = CORE
        .iter()
        .filter(|c| !c.name.contains('/'))
        .map(|c| APIResourceDiscovery {
            resource: c.name.into(),
            response_kind: kind(c.kind),
            scope: scope(c.namespaced),
            singular_resource: c.singular.into(),
            verbs: strings(c.verbs),
            short_names: strings(c.short_names),
            categories: strings(c.categories),
            subresources: CORE
                .iter()
                .filter_map(|s| {
                    let sub = s.name.strip_prefix(c.name)?.strip_prefix('/')?;
                    Some(APISubresourceDiscovery {
                        subresource: sub.into(),
                        response_kind: kind(s.kind),
                        verbs: strings(s.verbs),
                    })
                })
                .collect(),
        })
        .collect();
    resources.extend(core_builtins().map(|b| {
        let mut r = b.aggregated_resource();
        if token_request && b.resource == "serviceaccounts" {
            r.subresources.push(APISubresourceDiscovery {
                subresource: "token".into(),
                response_kind: Some(GroupVersionKind::new(
                    TOKEN_REQUEST.0,
                    TOKEN_REQUEST.1,
                    TOKEN_REQUEST.2,
                )),
                verbs: strings(&["create"]),
            });
        }
        r
    }));
    resources.sort_by(|a, b| a.resource.cmp(&b.resource));
    APIGroupDiscoveryList::new(vec![APIGroupDiscovery {
        metadata: GroupMeta::default(),
        versions: vec![APIVersionDiscovery {
            version: "v1".into(),
            resources,
            freshness: "Current".into(),
        }],
    }])
}

/// Serves one non-resource request: health, version, discovery or OpenAPI.
pub async fn serve(ctx: &Ctx, req: &Req) -> Result<Response<Body>, ApiError> {
    let path = req.info.path.trim_end_matches('/');
    let path = if path.is_empty() { "/" } else { path };
    if req.method != http::Method::GET && req.method != http::Method::HEAD {
        return Ok(crate::http::not_found_for(path));
    }
    match path {
        "/healthz" | "/livez" => Ok(health(req, path, &[("ping", true), ("log", true)])),
        "/healthz/ping" | "/livez/ping" | "/readyz/ping" => Ok(text_response(StatusCode::OK, "ok")),
        "/readyz" => {
            let checks =
                crate::backends::readiness::probe(&ctx.storage, &ctx.registry, &ctx.validation)
                    .await;
            let named: Vec<(&str, bool)> = vec![
                ("ping", true),
                ("storage", checks[0]),
                ("registry", checks[1]),
                ("validation", checks[2]),
                // Fails from the stop on (k8s.io/apiserver's `shutdown` readyz check), so
                // load balancers take the gateway out while it drains.
                ("shutdown", !ctx.shutdown.is_triggered()),
            ];
            Ok(health(req, path, &named))
        }
        "/metrics" => {
            let mut r = Response::new(crate::http::full(ctx.metrics.encode()));
            r.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static(crdplane_transport::metrics::TEXT_FORMAT),
            );
            Ok(r)
        }
        "/version" => Ok(json_response(
            StatusCode::OK,
            serde_json::to_vec(&version_info()).expect("json"),
        )),
        "/api" => {
            if wants_aggregated(req) {
                return Ok(aggregated_response(
                    serde_json::to_vec(&core_aggregated(ctx.cfg.service_account_signer.is_some()))
                        .expect("json"),
                ));
            }
            let v = json!({"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":ctx.cfg.advertise_address}]});
            Ok(json_response(
                StatusCode::OK,
                serde_json::to_vec(&v).expect("json"),
            ))
        }
        "/api/v1" => Ok(json_response(
            StatusCode::OK,
            serde_json::to_vec(&core_v1_resources(ctx.cfg.service_account_signer.is_some()))
                .expect("json"),
        )),
        "/apis" => {
            let d = discovery(ctx, &req.info.tenant).await?;
            if wants_aggregated(req) {
                Ok(aggregated_response(d.aggregated))
            } else {
                Ok(json_response(StatusCode::OK, d.group_list))
            }
        }
        "/openapi/v2" => openapi_v2(ctx, req).await,
        "/openapi/v3" => openapi_v3(ctx, req, "").await,
        p if p.starts_with("/openapi/v3/") => {
            openapi_v3(ctx, req, &p["/openapi/v3/".len()..]).await
        }
        p if p.starts_with("/apis/") => {
            let rest = &p["/apis/".len()..];
            let d = discovery(ctx, &req.info.tenant).await?;
            match rest.split_once('/') {
                None => {
                    let groups: Value =
                        serde_json::from_slice(&d.group_list).map_err(ApiError::internal)?;
                    let g = groups
                        .get("groups")
                        .and_then(Value::as_array)
                        .and_then(|gs| {
                            gs.iter()
                                .find(|g| g.get("name").and_then(Value::as_str) == Some(rest))
                        })
                        .cloned();
                    // apiextensions-apiserver's group discovery handler delegates a group no
                    // CRD serves to the not-found handler.
                    let Some(mut g) = g else {
                        return Ok(crate::http::not_found_for(path));
                    };
                    if let Some(m) = g.as_object_mut() {
                        m.insert("kind".into(), json!("APIGroup"));
                        m.insert("apiVersion".into(), json!("v1"));
                    }
                    Ok(json_response(
                        StatusCode::OK,
                        serde_json::to_vec(&g).expect("json"),
                    ))
                }
                Some((group, version)) if !version.contains('/') => {
                    match d.resource_lists.get(&format!("{group}/{version}")) {
                        Some(list) => Ok(json_response(StatusCode::OK, list.clone())),
                        // Its version discovery handler delegates likewise.
                        None => Ok(crate::http::not_found_for(path)),
                    }
                }
                _ => Ok(crate::http::not_found_for(path)),
            }
        }
        _ => Ok(crate::http::not_found_for(path)),
    }
}

/// The discovery documents of `tenant` (the registry's: its CRDs and the built-in types),
/// with the Tenants' group in the admin scope.
async fn discovery(
    ctx: &Ctx,
    tenant: &str,
) -> Result<crate::backends::registry::Discovery, ApiError> {
    let mut d = crate::backends::registry::discovery(&ctx.registry, tenant).await?;
    if tenant == crate::stores::tenants::ADMIN_SCOPE {
        crate::tenants::add_discovery(&mut d);
    }
    Ok(d)
}

/// Upstream health output: `ok`, or with `?verbose` one `[+]name ok` line per check and
/// `<path> check passed`; a failing check gives 500 with `[-]name failed: reason withheld`.
fn health(req: &Req, path: &str, checks: &[(&str, bool)]) -> Response<Body> {
    let ok = checks.iter().all(|c| c.1);
    let name = path.trim_start_matches('/');
    let verbose = req.query.0.iter().any(|(k, _)| k == "verbose");
    let body = if verbose || !ok {
        let mut s = String::new();
        for (n, good) in checks {
            if *good {
                s.push_str(&format!("[+]{n} ok\n"));
            } else {
                s.push_str(&format!("[-]{n} failed: reason withheld\n"));
            }
        }
        if ok {
            s.push_str(&format!("{name} check passed\n"));
        } else {
            s.push_str(&format!("{name} check failed\n"));
        }
        s
    } else {
        "ok".to_string()
    };
    let mut r = Response::new(full(body));
    *r.status_mut() = if ok {
        StatusCode::OK
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

fn etag_matches(req: &Req, etag: &str) -> bool {
    req.header(http::header::IF_NONE_MATCH).is_some_and(|v| {
        v.split(',')
            .any(|t| t.trim().trim_start_matches("W/") == etag)
    })
}

async fn openapi_v2(ctx: &Ctx, req: &Req) -> Result<Response<Body>, ApiError> {
    let d = crate::backends::registry::openapi_v2(&ctx.registry, &req.info.tenant).await?;
    let accept = parse_accept(req.header(http::header::ACCEPT));
    let proto = accept
        .iter()
        .find_map(|r| PROTO_V2.iter().find(|p| **p == r.mime).copied());
    let json_ok = accept.is_empty()
        || accept.iter().any(|r| {
            matches!(
                r.mime.as_str(),
                "application/json" | "*/*" | "application/*"
            )
        });
    let etag = format!("\"{}\"", d.etag);
    // Answer protobuf with the `.v1.0+protobuf` form even when asked with `@v1.0+protobuf`:
    // Go's mime parser (client-go's response handling) rejects '@' in a Content-Type.
    let (ct, body) = match proto {
        Some(_) => (PROTO_V2[1], d.protobuf),
        None if json_ok => ("application/json", d.json),
        None => return Err(ApiError::not_acceptable(&["application/json", PROTO_V2[0]])),
    };
    let mut r = if etag_matches(req, &etag) {
        let mut r = Response::new(full(bytes::Bytes::new()));
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        Response::new(full(body))
    };
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    r.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        r.headers_mut().insert(header::ETAG, v);
    }
    Ok(r)
}

async fn openapi_v3(ctx: &Ctx, req: &Req, path: &str) -> Result<Response<Body>, ApiError> {
    let Some(d) =
        crate::backends::registry::openapi_v3(&ctx.registry, &req.info.tenant, path).await?
    else {
        return Err(ApiError::path_not_found());
    };
    let etag = format!("\"{}\"", d.etag);
    let mut r = if !d.etag.is_empty() && etag_matches(req, &etag) {
        let mut r = Response::new(full(bytes::Bytes::new()));
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        json_response(StatusCode::OK, d.json)
    };
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if !d.etag.is_empty()
        && let Ok(v) = HeaderValue::from_str(&etag)
    {
        r.headers_mut().insert(header::ETAG, v);
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_v1_lists_the_builtin_types_in_name_order() {
        let v = core_v1_resources(false);
        // Upstream's legacy /api/v1 list carries no apiVersion.
        assert!(v.get("apiVersion").is_none(), "{v}");
        let names: Vec<&str> = v["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "configmaps",
                "events",
                "namespaces",
                "namespaces/finalize",
                "namespaces/status",
                "pods",
                "replicationcontrollers",
                "secrets",
                "serviceaccounts",
                "services"
            ]
        );
        assert_eq!(
            v["resources"][0],
            json!({"name": "configmaps", "singularName": "configmap", "namespaced": true,
                   "kind": "ConfigMap", "verbs": crdplane_core::builtin::ALL_VERBS,
                   "shortNames": ["cm"], "storageVersionHash": "qFsyl6wFWjQ="})
        );
        let agg = serde_json::to_value(core_aggregated(false)).unwrap();
        let res = &agg["items"][0]["versions"][0]["resources"];
        assert_eq!(res.as_array().unwrap().len(), 8);
        assert_eq!(
            res[8 - 1]["resource"],
            "services",
            "sorted by resource name"
        );
        assert_eq!(
            res[7 - 1],
            json!({"resource": "serviceaccounts",
                   "responseKind": {"group": "", "version": "v1", "kind": "ServiceAccount"},
                   "scope": "Namespaced", "singularResource": "serviceaccount",
                   "verbs": crdplane_core::builtin::ALL_VERBS, "shortNames": ["sa"]})
        );
    }

    /// With a signing key, `serviceaccounts/token` as upstream lists it (legacy: its own
    /// entry naming authentication.k8s.io/v1 TokenRequest; aggregated: a subresource).
    #[test]
    fn token_request_is_listed_with_a_signer() {
        let v = core_v1_resources(true);
        let t = v["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "serviceaccounts/token")
            .expect("serviceaccounts/token");
        assert_eq!(
            *t,
            json!({"name": "serviceaccounts/token", "singularName": "", "namespaced": true,
                   "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest",
                   "verbs": ["create"]})
        );
        let agg = serde_json::to_value(core_aggregated(true)).unwrap();
        let sa = agg["items"][0]["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "serviceaccounts")
            .unwrap()
            .clone();
        assert_eq!(
            sa["subresources"],
            json!([{"subresource": "token",
                    "responseKind": {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"},
                    "verbs": ["create"]}])
        );
        assert!(
            core_v1_resources(false)
                .to_string()
                .find("serviceaccounts/token")
                .is_none()
        );
    }
}
