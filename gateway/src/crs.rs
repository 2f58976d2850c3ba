//! Custom-resource endpoints: get, list, create, update, patch, delete, deletecollection, the
//! status subresource (the scale subresource's endpoint is [`crate::scale_rest`]), for every
//! served version of an Established CRD.
//!
//! Writes are the generic handlers of `crdplane_apiserver::handlers` over the machinery of
//! [`crate::cr_rest::machinery`]: the custom resource's store, strategy (`/status` wrapped in
//! `StatusStrategy`) and admission chain (NamespaceLifecycle, then the validation service:
//! metadata, apiVersion/kind, prune, default, schema) from [`crate::stores::crs`]. Deletion
//! honours DeleteOptions and finalizers there. GET, LIST and WATCH are the read verbs of
//! [`crate::reads`] over the same store: they send the stored bytes as they are (spliced
//! into the list document) when no version rewrite or read defaults are needed, which JSON
//! values would cost a parse and a re-encode per object for; a watch's events are rewritten
//! to the served version and read-defaulted by the shared stream. Follows
//! apiextensions-apiserver pkg/apiserver/customresource_handler.go
//! and k8s.io/apiserver pkg/endpoints/handlers/{create,update,patch,delete,get}.go.

use crate::context::{Ctx, Req};
use crate::cr_rest::machinery;
use crate::cr_store::api_version;
use crate::crd::{CrdInfo, VersionInfo};
use crate::http::Body;
use crate::reads;
use crate::request::{
    FieldValidation, PATCH_TYPES, check_selectors, decode_body, field_validation, parse_limit,
    record_patch_findings, request_delete_options, write_options,
};
use crate::respond::{add_warnings, written};
use crate::stores::crs::CrStore;
use crdplane_apiserver::handlers;
use crdplane_apiserver::rest::{ListOptions, StatusStrategy};
use crdplane_core::ApiError;
use http::Response;
use serde_json::Value;
use std::sync::Arc;

/// Serves one request for a custom resource of `crd` (main resource, `/status`, `/scale`).
pub async fn serve(ctx: &Ctx, req: &Req, crd: Arc<CrdInfo>) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let ver = crd
        .version(&i.api_version)
        .ok_or_else(ApiError::path_not_found)?;
    if crd.namespaced {
        if i.namespace.is_empty() && !matches!(i.verb.as_str(), "list" | "watch") {
            return Err(ApiError::path_not_found());
        }
    } else if !i.namespace.is_empty() {
        return Err(ApiError::path_not_found());
    }
    let sub = i.subresource.as_str();
    match sub {
        "" => {}
        "status" if ver.has_status => {}
        "scale" if ver.scale.is_some() => {}
        _ => return Err(ApiError::path_not_found()),
    }
    if crd.terminating && sub.is_empty() && i.verb == "create" {
        // customresource_handler.go serveResource: MethodNotSupported, own message.
        let mut e = ApiError::method_not_supported(&crd.gr(), &i.verb);
        e.message = format!(
            "{} not allowed while custom resource definition is terminating",
            i.verb
        );
        return Err(e);
    }
    // Each verb's future is boxed on its own: the request's future (boxed once by the router)
    // then holds a pointer instead of the largest verb's state, and only the verb taken is
    // allocated and moved — a GET does not pay for the size of a create or a watch.
    let mut resp = match (sub, i.verb.as_str()) {
        ("scale", _) => Box::pin(crate::scale_rest::serve(ctx, req, &crd, ver)).await,
        (_, "get") => Box::pin(get(ctx, req, &crd, ver)).await,
        ("", "list") => Box::pin(list(ctx, req, &crd, ver)).await,
        ("", "watch") => Box::pin(watch(ctx, req, &crd, ver)).await,
        ("", "create") => Box::pin(create(ctx, req, &crd, ver)).await,
        (_, "update") => Box::pin(update(ctx, req, &crd, ver)).await,
        (_, "patch") => Box::pin(patch(ctx, req, &crd, ver)).await,
        ("", "delete") => Box::pin(delete(ctx, req, &crd, ver)).await,
        ("", "deletecollection") => Box::pin(delete_collection(ctx, req, &crd, ver)).await,
        _ => Err(ApiError::method_not_supported(&crd.gr(), &i.verb)),
    }?;
    if let Some(w) = deprecation_warning(&crd, ver) {
        add_warnings(&mut resp, &[w]);
    }
    Ok(resp)
}

/// Upstream `defaultDeprecationWarning` (customresource_handler.go).
pub fn deprecation_warning(crd: &CrdInfo, ver: &VersionInfo) -> Option<String> {
    if !ver.deprecated {
        return None;
    }
    if let Some(w) = &ver.deprecation_warning {
        return Some(w.clone());
    }
    let mut msg = format!("{}/{} {} is deprecated", crd.group, ver.name, crd.kind);
    // The newest served, non-deprecated version by Kubernetes version priority.
    let mut candidates: Vec<&VersionInfo> = crd
        .versions
        .iter()
        .filter(|v| v.served && !v.deprecated)
        .collect();
    candidates.sort_by(|a, b| crdplane_core::names::compare_kube_versions(&a.name, &b.name));
    if let Some(v) = candidates.first() {
        msg.push_str(&format!("; use {}/{} {}", crd.group, v.name, crd.kind));
    }
    Some(msg)
}

/// The read verbs' description of one served version of `crd` for `tenant`.
fn resource<'a>(
    crd: &'a CrdInfo,
    ver: &'a VersionInfo,
    tenant: &'a str,
    api_version: &'a str,
) -> reads::Resource<'a> {
    reads::Resource {
        api_version,
        kind: &crd.kind,
        list_kind: &crd.list_kind,
        stored: [tenant, &crd.group, &crd.plural],
        table: &ver.table,
    }
}

/// GET over the custom resource's store: the stored bytes as the served version shows them.
async fn get(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let store = CrStore::new(ctx, &i.tenant, crd, ver);
    reads::get(req, &resource(crd, ver, &i.tenant, ""), &store).await
}

/// LIST over the custom resource's store, the page's objects spliced into the list
/// document as bytes.
async fn list(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let store = CrStore::new(ctx, &i.tenant, crd, ver);
    let api_version = api_version(crd, &ver.name);
    let r = resource(crd, ver, &i.tenant, &api_version);
    reads::list(ctx, req, &r, &store, || check_selectors(req, crd, ver)).await
}

/// WATCH through the shared streams of the CRD's stored resource: each event's object in the
/// served version (its apiVersion rewritten), read-defaulted once per event and version by
/// the shared stream; the watch ends when the CRD is gone or re-specified.
async fn watch(
    ctx: &Ctx,
    req: &Req,
    crd: &Arc<CrdInfo>,
    ver: &VersionInfo,
) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let selectors = check_selectors(req, crd, ver)?;
    let api_version = api_version(crd, &ver.name);
    let (for_table, vname) = (crd.clone(), ver.name.clone());
    let table: crate::watch::TableFn = Arc::new(move |objs, with_columns, include| {
        let v = for_table.version(&vname).expect("served version");
        let meta = crate::table::ListMeta::default();
        v.table
            .to_table_with(objs, include, &meta, chrono::Utc::now(), with_columns)
    });
    let prefix = format!(
        "{{\"apiVersion\":{}",
        serde_json::to_string(&api_version).expect("json")
    );
    let want = Value::String(api_version.clone());
    let transform: crate::watch_mux::Transform = Arc::new(move |b: bytes::Bytes| {
        if b.starts_with(prefix.as_bytes()) {
            return b;
        }
        match serde_json::from_slice::<Value>(&b) {
            Ok(mut v) => {
                v["apiVersion"] = want.clone();
                bytes::Bytes::from(serde_json::to_vec(&v).expect("json"))
            }
            Err(_) => b,
        }
    });
    let r = resource(crd, ver, &i.tenant, &api_version);
    let mut t = reads::watch_target(req, &r, table, selectors);
    t.transform = Some(transform);
    t.normalize = crate::cr_store::watch_normalizer(ctx, crd, &i.tenant, ver);
    t.crd = Some(crd.clone());
    crate::watch::serve(ctx, req, t).await
}

fn require_kind(obj: &Value, body: &[u8]) -> Result<(), ApiError> {
    if obj
        .get("kind")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err(ApiError::bad_request(format!(
            "Object 'Kind' is missing in '{}'",
            String::from_utf8_lossy(body)
        )));
    }
    Ok(())
}

async fn create(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let opts = write_options(req)?;
    if crd.terminating {
        return Err(ApiError::method_not_supported(&crd.gr(), "create"));
    }
    let obj = decode_body(req)?;
    require_kind(&obj, &req.body)?;
    let (store, strategy, admission) = machinery(ctx, req, crd, ver);
    let w = handlers::create(&store, &strategy, &admission, &i.namespace, obj, &opts).await?;
    Ok(written(w, &[]))
}

pub use crdplane_apiserver::handlers::rv_required;

/// PUT of the object or of its `/status` (store.go Update inside GuaranteedUpdate: a
/// missing object is 404, as custom resources do not AllowCreateOnUpdate; the
/// resourceVersion is required and must be the stored one).
async fn update(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let opts = write_options(req)?;
    let obj = decode_body(req)?;
    require_kind(&obj, &req.body)?;
    let (store, strategy, admission) = machinery(ctx, req, crd, ver);
    let (ns, name, sub) = (&i.namespace, &i.name, i.subresource.as_str());
    let w = if sub == "status" {
        let strategy = StatusStrategy(strategy);
        handlers::update(&store, &strategy, &admission, sub, ns, name, obj, &opts).await?
    } else {
        handlers::update(&store, &strategy, &admission, sub, ns, name, obj, &opts).await?
    };
    Ok(written(w, &[]))
}

/// patch.go `applyJSPatch`: under fieldValidation Strict or Warn a merge patch is first
/// decoded strictly into a map, so a patch that is not an object (nor `null`) is a 400
/// `error decoding patch: json: cannot unmarshal <type> into Go value of type
/// map[string]interface {}` before anything is applied.
fn strict_merge_patch_shape(req: &Req) -> Result<(), ApiError> {
    if matches!(field_validation(req), Ok(FieldValidation::Ignore) | Err(_))
        || crate::http::media_type(req.header(http::header::CONTENT_TYPE).unwrap_or(""))
            != "application/merge-patch+json"
    {
        return Ok(());
    }
    let go_type = match serde_json::from_slice::<Value>(&req.body) {
        Ok(Value::Array(_)) => "array",
        Ok(Value::String(_)) => "string",
        Ok(Value::Number(_)) => "number",
        Ok(Value::Bool(_)) => "bool",
        _ => return Ok(()),
    };
    Err(ApiError::bad_request(format!(
        "error decoding patch: json: cannot unmarshal {go_type} into Go value of type \
         map[string]interface {{}}"
    )))
}

/// PATCH of the object or of its `/status`: the patch is applied to each fresh read inside
/// the generic retry loop (patch.go); a resourceVersion the patch sets is a precondition.
async fn patch(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    // Unsupported patch types are refused before the options are looked at.
    let mime = crate::request::patch_media_type(req);
    if !PATCH_TYPES.contains(&mime.as_str()) {
        return Err(ApiError::unsupported_media_type(&PATCH_TYPES));
    }
    let opts = write_options(req)?;
    let p = crate::request::patch_request(req, &mime)?;
    strict_merge_patch_shape(req)?;
    record_patch_findings(req);
    let (store, strategy, admission) = machinery(ctx, req, crd, ver);
    let (ns, name, sub) = (&i.namespace, &i.name, i.subresource.as_str());
    let w = if sub == "status" {
        let strategy = StatusStrategy(strategy);
        handlers::patch(&store, &strategy, &admission, sub, ns, name, &p, &opts).await?
    } else {
        handlers::patch(&store, &strategy, &admission, sub, ns, name, &p, &opts).await?
    };
    Ok(written(w, &[]))
}

// ---- deletion: DeleteOptions, finalizers, garbage-collection finalizers ------------------

pub use crdplane_apiserver::rest::delete::{
    DeleteOptions, DeletionPlan, FINALIZER_FOREGROUND, FINALIZER_ORPHAN,
    check_delete_preconditions, dry_run_not_supported, gc_finalizers, mark_as_deleting,
    no_new_finalizers, parse_delete_options_body, plan_deletion, should_delete_during_update,
    validate_delete_options,
};

async fn delete(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let o = request_delete_options(req)?;
    let (store, strategy, admission) = machinery(ctx, req, crd, ver);
    let w = handlers::delete(&store, &strategy, &admission, &i.namespace, &i.name, &o).await?;
    Ok(written(w, &[]))
}

/// store.go `DeleteCollection` over the generic handler: list the selected objects, then
/// delete each with the request's DeleteOptions. Answers with the list as it was read.
async fn delete_collection(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let o = request_delete_options(req)?;
    let (label_selector, field_selector) = check_selectors(req, crd, ver)?;
    let opts = ListOptions {
        label_selector,
        field_selector,
        limit: parse_limit(req)?,
        ..Default::default()
    };
    let (store, strategy, admission) = machinery(ctx, req, crd, ver);
    let all =
        handlers::delete_collection(&store, &strategy, &admission, &i.namespace, &opts, &o).await?;
    Ok(crate::respond::deleted_collection(
        &api_version(crd, &ver.name),
        &crd.list_kind,
        &all,
    ))
}
