//! The `/scale` subresource endpoint of custom resources: GET of the `autoscaling/v1` Scale
//! of an object, PUT, merge/JSON PATCH and server-side apply of `spec.replicas` back into
//! it.
//!
//! Request path: the custom-resource handler (`crs`) routes `…/<plural>/<name>/scale` here
//! when the served version declares `subresources.scale`. A write is the generic
//! `update_from` handler over the main resource's store, strategy and admission
//! (`cr_rest::machinery`): each read of the object gets the Scale's `spec.replicas` at
//! `specReplicasPath` ([`crate::scale`]), with the Scale's `metadata.resourceVersion` (if
//! any) as the optimistic-concurrency precondition, and is written as an update of the
//! main resource (schema admission, compare-and-swap in storage). The response is the Scale
//! of the stored object.
//!
//! Follows apiextensions-apiserver pkg/registry/customresource/etcd.go (`ScaleREST`: Get,
//! Update, `scaleUpdatedObjectInfo`).

use crate::context::{Ctx, Req};
use crate::cr_rest::machinery;
use crate::crd::{CrdInfo, VersionInfo};
use crate::http::{Body, json_response};
use crate::request::{APPLY_PATCH, apply_patch, decode_body, patch_request, write_options};
use crate::respond::add_warnings;
use crate::scale::{
    INVALID_SPEC_REPLICAS, Scale, ScalePaths, ScaleWrite, apply_scale, decode_scale,
    scale_from_object,
};
use crdplane_apiserver::fieldmanager::set_managed_fields;
use crdplane_apiserver::handlers;
use crdplane_apiserver::rest::stored_rv;
use crdplane_core::field::go_quote;
use crdplane_core::managedfields::Entry;
use crdplane_core::{ApiError, Reason};
use http::{Response, StatusCode};
use serde_json::Value;

/// GET / PUT / PATCH of `…/<name>/scale`.
pub async fn serve(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<Response<Body>, ApiError> {
    let Some(scale) = &ver.scale else {
        return Err(ApiError::path_not_found());
    };
    let paths = ScalePaths::from_crd(scale);
    if req.info.verb != "get" {
        write_options(req)?;
    }
    match req.info.verb.as_str() {
        "get" => get(ctx, req, crd, ver, &paths).await,
        "update" => update(ctx, req, crd, ver, &paths).await,
        "patch" => patch(ctx, req, crd, ver, &paths).await,
        v => Err(ApiError::method_not_supported(&crd.gr(), v)),
    }
}

/// The patch types of `/scale`, as apiextensions-apiserver serves them (JSON and merge
/// patch, server-side apply).
const SCALE_PATCH_TYPES: [&str; 3] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    APPLY_PATCH,
];

/// A non-API error of the scale conversion: upstream's generic 500 carries the raw text.
fn accessor_error(e: String) -> ApiError {
    ApiError::new(Reason::InternalError, e)
}

async fn get(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
    paths: &ScalePaths,
) -> Result<Response<Body>, ApiError> {
    let (store, _, _) = machinery(ctx, req, crd, ver);
    let obj = handlers::get(&store, &req.info.namespace, &req.info.name).await?;
    let (scale, found) = scale_from_object(&obj, paths).map_err(accessor_error)?;
    if !found {
        return Err(ApiError::internal(format!(
            "the spec replicas field {} does not exist",
            go_quote(&paths.spec_replicas)
        )));
    }
    Ok(json_response(StatusCode::OK, scale.to_json()))
}

/// URL identity checks of a written Scale (the update handler's `checkName`).
fn check_identity(w: &ScaleWrite, req: &Req) -> Result<(), ApiError> {
    let i = &req.info;
    if w.name != i.name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({})",
            w.name, i.name
        )));
    }
    if !w.namespace.is_empty() && w.namespace != i.namespace {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}

/// Writes the Scale `scale_of` makes of each read of the object into it and stores it as an
/// update of the main resource (etcd.go `scaleUpdatedObjectInfo`); a resourceVersion in the
/// Scale is a precondition checked against every read. When `scale_of` also gives the
/// object's managedFields (an apply, [`apply`]) they are set as they are; any other write
/// is recorded as an Update.
async fn write(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
    paths: &ScalePaths,
    applied: bool,
    scale_of: impl Fn(&Value) -> Result<(ScaleWrite, Option<Vec<Entry>>), ApiError> + Sync,
) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let opts = write_options(req)?;
    let (store, strategy, admission) = machinery(ctx, req, crd, ver);
    let gr = crd.gr();
    let to_write = |old: &Value| {
        let (w, entries) = scale_of(old)?;
        check_identity(&w, req)?;
        if !w.resource_version.is_empty() {
            let rv: u64 = w.resource_version.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid resourceVersion {:?}", w.resource_version))
            })?;
            if rv != stored_rv(old) {
                return Err(ApiError::stale(&gr, &i.name));
            }
        }
        let mut obj = apply_scale(old, paths, &w)?;
        if let Some(entries) = entries {
            set_managed_fields(&mut obj, &entries);
        }
        Ok((obj, Vec::new()))
    };
    let written = handlers::update_from(
        &store,
        &strategy,
        &admission,
        "scale",
        &i.namespace,
        &i.name,
        &opts,
        to_write,
        !applied,
    )
    .await?;
    let (scale, _) = scale_from_object(&written.object, paths).map_err(ApiError::bad_request)?;
    let mut r = json_response(StatusCode::OK, scale.to_json());
    add_warnings(&mut r, &written.warnings);
    Ok(r)
}

async fn update(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
    paths: &ScalePaths,
) -> Result<Response<Body>, ApiError> {
    let body = decode_body(req)?;
    let w = decode_scale(&body)?;
    write(ctx, req, crd, ver, paths, false, |_| Ok((w.clone(), None))).await
}

/// The Scale of `old`, its replicas upstream's placeholder when the object has none (so a
/// patch that sets none can be told apart).
fn current_scale(old: &Value, paths: &ScalePaths) -> Result<Scale, ApiError> {
    let (mut scale, found) = scale_from_object(old, paths).map_err(accessor_error)?;
    if !found {
        scale.spec.replicas = INVALID_SPEC_REPLICAS as i32;
    }
    Ok(scale)
}

async fn patch(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
    paths: &ScalePaths,
) -> Result<Response<Body>, ApiError> {
    let ct = req
        .header(http::header::CONTENT_TYPE)
        .unwrap_or("")
        .to_string();
    let mime = crate::http::media_type(&ct);
    if !SCALE_PATCH_TYPES.contains(&mime.as_str()) {
        return Err(ApiError::unsupported_media_type(&SCALE_PATCH_TYPES));
    }
    if mime == APPLY_PATCH {
        return apply(ctx, req, crd, ver, paths).await;
    }
    write(ctx, req, crd, ver, paths, false, |old| {
        let scale = current_scale(old, paths)?;
        let patched = apply_patch(&ct, &req.body, &scale.to_value())?;
        Ok((decode_scale(&patched)?, None))
    })
    .await
}

/// Server-side apply of a Scale (upstream: the apply patcher over `scaleUpdatedObjectInfo`,
/// with the `ScaleHandler` mapping managedFields): each read of the object is turned into
/// its Scale, whose managedFields are the object's owners of the replicas path, the applied
/// Scale is merged into it by the field manager (conflicts name the Scale's
/// `.spec.replicas`), and its `spec.replicas` and the entries mapped back are written into
/// the object.
async fn apply(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
    paths: &ScalePaths,
) -> Result<Response<Body>, ApiError> {
    use crdplane_apiserver::fieldmanager::{ApplyRequest, apply_to_scale};
    use crdplane_core::scalefields::field_path;
    let opts = write_options(req)?;
    let preq = patch_request(req, APPLY_PATCH)?;
    let Some(config) = &preq.applied else {
        return Err(ApiError::bad_request(
            "error decoding YAML: no applied configuration",
        ));
    };
    // Every version's replicas path (none for a version without a scale subresource).
    let mappings: Vec<_> = crd
        .versions
        .iter()
        .map(|v| {
            let path = v
                .scale
                .as_ref()
                .map(|s| field_path(&ScalePaths::from_crd(s).spec_replicas));
            (format!("{}/{}", crd.group, v.name), path)
        })
        .collect();
    let areq = ApplyRequest {
        config,
        force: preq.force,
        kind: "Scale",
        subresource: "scale",
        status_subresource: false,
    };
    write(ctx, req, crd, ver, paths, true, |old| {
        let scale = current_scale(old, paths)?.to_value();
        let (applied, entries) = apply_to_scale(&opts, old, &scale, &areq, &mappings)?;
        Ok((decode_scale(&applied)?, Some(entries)))
    })
    .await
}
