//! The built-in types (`crdplane_core::builtin::BUILTIN`: ConfigMap, Secret, ServiceAccount,
//! the two Event APIs, Lease, Role, ClusterRole, RoleBinding, ClusterRoleBinding), served per
//! tenant through the generic machinery: every
//! write verb is a generic handler of `crdplane_apiserver` over [`BuiltinStore`] (the storage
//! service, with the version conversion and expiry of the type) and the type's strategy
//! (`crate::stores::builtin`); reads render JSON or Table; watches are the shared watch
//! streams of [`crate::watch`].
//!
//! Where it sits: the router (`api.rs`) sends `/api/v1/…/{configmaps,secrets,
//! serviceaccounts,events}` and `/apis/{events.k8s.io,coordination.k8s.io,
//! rbac.authorization.k8s.io}/v1/…` here. ClusterRole and ClusterRoleBinding are
//! cluster-scoped: their paths have no namespace, and a namespaced path is a 404 as
//! go-restful answers it (no route).
//! Follows k8s.io/apiserver pkg/endpoints/handlers (verbs) over
//! pkg/registry/generic/registry/store.go, with upstream's per-type registries for the
//! rules (see the strategies).

use crate::context::{Ctx, Req};
use crate::http::{Body, json_response};
use crate::lifecycle::NamespaceExists;
use crate::reads;
use crate::request::{
    field_validation, record_patch_findings, request_delete_options, strict_decoding_error,
    write_options,
};
use crate::respond::with_warnings;
use crate::stores::builtin::{BuiltinStore, BuiltinStrategy, BuiltinType, protobuf, type_of};
use crdplane_apiserver::admission::Chain;
use crdplane_apiserver::handlers::{self, Written};
use crdplane_apiserver::rest::ListOptions;
use crdplane_core::ApiError;
use crdplane_core::builtin::BuiltinResource;
use crdplane_core::options::FieldValidation;
use crdplane_core::selector::FieldSelector;
use http::{Response, StatusCode};
use serde_json::Value;
use std::sync::Arc;

/// Serves one request for the built-in resource `r`.
pub async fn serve(
    ctx: &Arc<Ctx>,
    req: &Req,
    r: &'static BuiltinResource,
) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let ty = type_of(r);
    if r.group.is_empty()
        && r.resource == "serviceaccounts"
        && i.subresource == "token"
        && !i.name.is_empty()
    {
        return Box::pin(crate::token_request::serve(ctx, req)).await;
    }
    if !routed(r, &i.namespace, &i.verb, &i.subresource) {
        return Ok(crate::http::page_not_found());
    }
    let strategy = BuiltinStrategy::new(ty);
    let store = BuiltinStore::new(ctx, &i.tenant, ty);
    // Namespace existence (upstream's NamespaceLifecycle) concerns namespaced objects only.
    let anonymous;
    let mut admission = if r.namespaced {
        Chain(vec![Box::new(NamespaceExists {
            ctx,
            tenant: &i.tenant,
        })])
    } else {
        Chain(Vec::new())
    };
    // RBAC writes: no one grants what they do not hold.
    if r.group == crdplane_auth::rbac::GROUP {
        let user = match req.user.as_deref() {
            Some(u) => u,
            None => {
                anonymous = crdplane_auth::user::UserInfo::anonymous();
                &anonymous
            }
        };
        admission
            .0
            .push(Box::new(crate::rbac_admission::Escalation {
                ctx,
                tenant: &i.tenant,
                user,
            }));
    }
    let resp = match i.verb.as_str() {
        "get" => reads::get(req, &resource(req, ty, ""), &store).await,
        "list" => {
            let api_version = r.api_version();
            let res = resource(req, ty, &api_version);
            reads::list(ctx, req, &res, &store, || selectors(req, ty)).await
        }
        "watch" => watch(ctx, req, ty).await,
        "create" => {
            let opts = write_options(req)?;
            let obj = request_object(req, ty)?;
            let warnings = strictness(req, ty, &obj)?;
            let w =
                handlers::create(&store, &strategy, &admission, &i.namespace, obj, &opts).await?;
            written(req, ty, w, &warnings)
        }
        "update" => {
            let opts = write_options(req)?;
            let obj = request_object(req, ty)?;
            let warnings = strictness(req, ty, &obj)?;
            let w = handlers::update(
                &store,
                &strategy,
                &admission,
                "",
                &i.namespace,
                &i.name,
                obj,
                &opts,
            )
            .await?;
            written(req, ty, w, &warnings)
        }
        "patch" => {
            record_patch_findings(req);
            let warnings =
                findings_under_policy(req, ty, crate::request::body_findings(req).to_vec())?;
            let mime = crate::request::patch_media_type(req);
            let opts = write_options(req)?;
            let w = handlers::patch(
                &store,
                &strategy,
                &admission,
                "",
                &i.namespace,
                &i.name,
                &crate::request::patch_request(req, &mime)?,
                &opts,
            )
            .await?;
            written(req, ty, w, &warnings)
        }
        "delete" => {
            let o = request_delete_options(req)?;
            let w =
                handlers::delete(&store, &strategy, &admission, &i.namespace, &i.name, &o).await?;
            written(req, ty, w, &[])
        }
        "deletecollection" => {
            let o = request_delete_options(req)?;
            let (label_selector, field_selector) = selectors(req, ty)?;
            let opts = ListOptions {
                label_selector,
                field_selector,
                limit: crate::request::parse_limit(req)?,
                ..Default::default()
            };
            let all =
                handlers::delete_collection(&store, &strategy, &admission, &i.namespace, &opts, &o)
                    .await?;
            let r = ty.resource();
            Ok(crate::respond::deleted_collection(
                &r.api_version(),
                r.list_kind,
                &all,
            ))
        }
        verb => Err(ApiError::method_not_supported(&gr(r), verb)),
    };
    // A ClusterRole changed: with no authorizer reading policies (AlwaysAllow), the
    // aggregation controller's write-back runs from here (crate::policy::aggregate).
    if r.resource == "clusterroles"
        && resp.is_ok()
        && !matches!(i.verb.as_str(), "get" | "list" | "watch")
        && ctx.authz.mode() == crate::authz::Mode::AlwaysAllow
    {
        let (ctx, tenant) = (ctx.clone(), i.tenant.clone());
        tokio::spawn(async move {
            if let Err(e) = crate::policy::aggregate(&ctx, &tenant).await {
                tracing::warn!(%tenant, error = %e.message, "aggregating ClusterRoles failed");
            }
        });
    }
    resp
}

/// Whether go-restful has a route for the request: a namespaced type answers list and watch
/// across namespaces and needs the namespace for everything else; a cluster-scoped type
/// (ClusterRole, ClusterRoleBinding) has no route under `/namespaces/{ns}/`. No subresource
/// is served.
fn routed(r: &BuiltinResource, namespace: &str, verb: &str, subresource: &str) -> bool {
    let scope_ok = if r.namespaced {
        !namespace.is_empty() || matches!(verb, "list" | "watch")
    } else {
        namespace.is_empty()
    };
    scope_ok && subresource.is_empty()
}

use crate::stores::builtin::gr;

/// The request body as an object of the type: JSON or YAML, or protobuf for the kinds
/// kubectl sends that way.
fn request_object(req: &Req, ty: &dyn BuiltinType) -> Result<Value, ApiError> {
    protobuf::request_object(req, ty.resource().kind)
}

/// The strict-decoding findings of a create/update body (duplicate keys, unknown fields)
/// under the request's `fieldValidation`: the warnings to send, or the Strict 400.
fn strictness(req: &Req, ty: &dyn BuiltinType, obj: &Value) -> Result<Vec<String>, ApiError> {
    let mut found = crate::request::body_findings(req).to_vec();
    if field_validation(req)? != FieldValidation::Ignore {
        found.extend(crate::stores::builtin::unknown_field_findings(ty, obj));
    }
    findings_under_policy(req, ty, found)
}

fn findings_under_policy(
    req: &Req,
    ty: &dyn BuiltinType,
    found: Vec<String>,
) -> Result<Vec<String>, ApiError> {
    let r = ty.resource();
    match field_validation(req)? {
        FieldValidation::Ignore => Ok(Vec::new()),
        FieldValidation::Warn => Ok(found),
        FieldValidation::Strict if found.is_empty() => Ok(Vec::new()),
        FieldValidation::Strict => Err(ApiError::bad_request(strict_decoding_error(
            &req.info.verb,
            r.kind,
            r.version,
            &found,
        ))),
    }
}

/// A write's answer: its code, the object (or Status) as JSON or Table, warnings.
fn written(
    req: &Req,
    ty: &dyn BuiltinType,
    w: Written,
    extra: &[String],
) -> Result<Response<Body>, ApiError> {
    let mut warnings = extra.to_vec();
    warnings.extend(w.warnings);
    let code = StatusCode::from_u16(w.code).unwrap_or(StatusCode::OK);
    if w.object.get("kind").and_then(Value::as_str) == Some("Status") {
        let resp = json_response(code, serde_json::to_vec(&w.object).expect("json"));
        return Ok(with_warnings(resp, &warnings));
    }
    reads::object(req, ty.table(), code, &w.object, &warnings)
}

/// The request's selectors, checked: label selector syntax, field selector syntax and
/// labels (`metadata.name`, `metadata.namespace` and the type's own; upstream's
/// `field label not supported: x` otherwise).
fn checked_selectors(req: &Req, ty: &dyn BuiltinType) -> Result<(String, String), ApiError> {
    crate::list::checked_selectors(req, |f| {
        matches!(f, "metadata.name" | "metadata.namespace") || ty.field_labels().contains(&f)
    })
}

/// A field selector of the served version as paths of the stored objects.
fn stored_field_selector(ty: &dyn BuiltinType, field: &str) -> Result<String, ApiError> {
    if field.is_empty() {
        return Ok(String::new());
    }
    let f = FieldSelector::parse(field).map_err(ApiError::bad_request)?;
    let parts: Vec<String> = f
        .requirements()
        .iter()
        .map(|r| {
            let label = ty.stored_field_label(&r.field);
            let op = match r.operator {
                crdplane_core::selector::FieldOperator::Equals => "=",
                crdplane_core::selector::FieldOperator::NotEquals => "!=",
            };
            format!(
                "{label}{op}{}",
                crdplane_core::selector::escape_field_value(&r.value)
            )
        })
        .collect();
    Ok(parts.join(","))
}

/// The read verbs' description of `ty` for the request's tenant.
fn resource<'a>(
    req: &'a Req,
    ty: &'static dyn BuiltinType,
    api_version: &'a str,
) -> reads::Resource<'a> {
    let r = ty.resource();
    reads::Resource {
        api_version,
        kind: r.kind,
        list_kind: r.list_kind,
        stored: [&req.info.tenant, r.storage.0, r.storage.1],
        table: ty.table(),
    }
}

/// The selectors of a list or watch as the stored objects are matched: checked, then the
/// field selector's labels made paths of the stored form.
fn selectors(req: &Req, ty: &dyn BuiltinType) -> Result<(String, String), ApiError> {
    let (label, field) = checked_selectors(req, ty)?;
    Ok((label, stored_field_selector(ty, &field)?))
}

/// WATCH through the shared streams of the storage triple.
async fn watch(
    ctx: &Ctx,
    req: &Req,
    ty: &'static dyn BuiltinType,
) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let r = ty.resource();
    let selectors = selectors(req, ty)?;
    let sealing =
        crate::encryption::Sealing::new(ctx.cfg.encryption.as_ref(), &i.tenant, r.storage);
    // Events' objects: opened (encryption at rest), then in the served form. An object that
    // does not open is logged and sent as stored (ciphertext, never plaintext).
    let transform: Option<crate::watch_mux::Transform> =
        (r.storage != (r.group, r.resource) || sealing.active()).then(|| {
            let f: crate::watch_mux::Transform = Arc::new(move |b: bytes::Bytes| {
                let Ok(v) = serde_json::from_slice::<Value>(&b) else {
                    return b;
                };
                match sealing.open(v) {
                    Ok(v) => serde_json::to_vec(&ty.served_form(v)).expect("json").into(),
                    Err(e) => {
                        tracing::error!(error = %e.message, "watch event not decrypted");
                        b
                    }
                }
            });
            f
        });
    let api_version = r.api_version();
    let table = crate::watch::table_fn(ty.table());
    let mut t = reads::watch_target(req, &resource(req, ty, &api_version), table, selectors);
    t.transform = transform;
    crate::watch::serve(ctx, req, t).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crdplane_core::builtin::lookup;

    #[test]
    fn routes_follow_the_scope() {
        let cm = lookup("", "v1", "configmaps").unwrap();
        let crb = lookup("rbac.authorization.k8s.io", "v1", "clusterrolebindings").unwrap();
        assert!(routed(cm, "ns", "get", ""));
        assert!(routed(cm, "", "list", ""));
        assert!(routed(cm, "", "watch", ""));
        assert!(!routed(cm, "", "get", ""));
        assert!(!routed(cm, "", "create", ""));
        assert!(!routed(cm, "ns", "get", "status"));
        assert!(routed(crb, "", "get", ""));
        assert!(routed(crb, "", "create", ""));
        assert!(routed(crb, "", "deletecollection", ""));
        assert!(!routed(crb, "ns", "get", ""));
        assert!(!routed(crb, "ns", "list", ""));
        assert!(!routed(crb, "", "get", "status"));
    }
}
